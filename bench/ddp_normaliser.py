"""A/B of the ddp training step's loss normaliser: its own all-gather (A, a plain loss function) against its counts
riding on the gradient all-reduce (B, the same loss as `rl_engines.training.NormalizedLoss`), in the same 2 gloo
processes (one intra-op thread each), alternating A, B, B, A step by step from the same weights.

Model and batch: the embedded default's shape (`--size embedded`), `--rows` rows per rank in groups of
`--group-size` sharing a prompt, `--max-len` columns, one micro-batch per rank, PPO token-mean loss, AdamW with
clipping: the small-shape `update_actor` of bench/README.md's profile. Each step starts after a barrier.

Also printed: the median over steps of A's time minus its neighbouring B's (the pairs share the machine's load).

Last line: RESULT ddp_normaliser median_ms_a=<A> median_ms_b=<B> ratio=<B/A> goal=1.0 met|missed
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import time
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp
from _train_engine_sides import SIZES, hf_config, ppo_loss, rollout_batch

GOAL_RATIO = 1.0


def _loss(outputs: Any, micro: dict[str, torch.Tensor], normalizer: Any) -> Any:
    from rl_engines.training import LossOutput

    return LossOutput(ppo_loss(outputs.log_probs, micro, normalizer), {})


def _engine(args: argparse.Namespace) -> Any:
    from rl_engines.training import FSDPEngine, MicroBatchConfig, ModelConfig, OptimizerConfig, TrainEngineConfig

    config = TrainEngineConfig(
        model=ModelConfig(hf_config=hf_config(args), init_seed=args.seed),
        optimizer=OptimizerConfig(lr=args.lr, weight_decay=0.01, max_grad_norm=1.0),
        micro_batch=MicroBatchConfig(max_tokens_per_micro_batch=args.rows * args.max_len, packing=False),
        device="cpu",
        data_parallel="ddp",
    )
    return FSDPEngine.from_config(config)


def _rank(rank: int, args: argparse.Namespace, port: int, out: str) -> None:
    import torch.distributed as dist

    from rl_engines.training import ForwardSpec, NormalizedLoss

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        batch = rollout_batch(args, args.rows, seed=args.seed + rank, vocab=SIZES[args.size]["vocab_size"])
        engine = _engine(args)
        sides = {"a": _loss, "b": NormalizedLoss(_loss, "token-mean")}
        times: dict[str, list[float]] = {"a": [], "b": []}
        for index in range(args.warmup + args.steps):
            # A, B then B, A: neither side always runs first after the barrier.
            for name in ("a", "b") if index % 2 == 0 else ("b", "a"):
                loss_fn = sides[name]
                dist.barrier()
                start = time.perf_counter()
                result = engine.train_step(batch, loss_fn, ForwardSpec())
                elapsed = time.perf_counter() - start
                if result.skipped:
                    raise RuntimeError(f"a benchmark step was skipped: {result}")
                if index >= args.warmup:
                    times[name].append(elapsed)
        Path(out, f"rank{rank}.json").write_text(json.dumps(times))
    finally:
        dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="embedded", choices=sorted(SIZES))
    parser.add_argument("--rows", type=int, default=32, help="rows per rank")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-len", type=int, default=48)
    parser.add_argument("--steps", type=int, default=60, help="timed steps of each side")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="/tmp/ddp_normaliser")
    args = parser.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    mp.spawn(_rank, args=(args, port, args.out), nprocs=2)
    ranks = [json.loads(Path(args.out, f"rank{rank}.json").read_text()) for rank in range(2)]
    # A step lasts as long as its slower rank.
    medians = {
        name: 1000 * statistics.median(max(pair) for pair in zip(ranks[0][name], ranks[1][name], strict=True))
        for name in ("a", "b")
    }
    print(f"load average: {os.getloadavg()}")
    for name, label in (("a", "separate all-gather"), ("b", "counts on the gradient all-reduce")):
        print(f"{name} ({label}): median {medians[name]:.2f} ms per step (slower rank), {args.steps} steps")
    # Steps alternate, so each A has its B neighbour under about the same load: their difference is less noisy.
    slower = {name: [max(pair) for pair in zip(ranks[0][name], ranks[1][name], strict=True)] for name in ("a", "b")}
    saved = 1000 * statistics.median(a - b for a, b in zip(slower["a"], slower["b"], strict=True))
    print(f"median paired saving (a - b): {saved:.2f} ms per step")
    ratio = medians["b"] / medians["a"]
    verdict = "met" if ratio <= GOAL_RATIO else "missed"
    print(
        f"RESULT ddp_normaliser median_ms_a={medians['a']:.2f} median_ms_b={medians['b']:.2f} "
        f"ratio={ratio:.3f} goal={GOAL_RATIO} {verdict}"
    )


if __name__ == "__main__":
    main()
