"""Training tokens/s of the FSDP2 train engine against a plain transformers + AdamW loop, and peak memory.

Both sides train the same model (same initial weights) on the same rollout-shaped batch (left-padded
prompts, responses, right padding), with the same micro-batches and the same PPO loss from rl_core
(token-mean over the step's global token count), AdamW and gradient clipping:
  plain   `model(input_ids, attention_mask, position_ids).logits` on each micro-batch's padded rows (cut
          to the columns in use), `log_softmax` + `gather`, backward; clip; AdamW step.
  engine  `FSDPEngine.train_step`: packed micro-batches (no padding), log-probs of response tokens from
          hidden states through rl_core's chunked function, backward; clip; AdamW step. One process
          runs unsharded (no process group); `--dist` also runs 2 gloo processes with FSDP2, each with
          half the batch, one intra-op thread each (the 2-process figure, measured in its own processes).

  engine-fsdp1  the engine under a world-size-1 process group, i.e. FSDP2-wrapped as a launcher would run
          it on one device (`--no-fsdp-one` skips it).

`--group-size G` (> 1) makes rows share prompts in groups of G, as a GRPO batch does: the engine then runs padded
rows with each shared prompt run once (`MicroBatchConfig.share_prefixes`), and `engine-padded`, the same engine
with sharing off, is timed too, so the line `engine/engine-padded` is the shared-prefix gain in the same run.

Timing: one warm-up step each, then plain, engine, engine-fsdp1, plain, ... (`--reps` of each, default 5) in
the same process; tokens/s = valid tokens of the batch / median step seconds. Peak memory: each side runs
build + 3 steps in its own fresh child process; CPU reports the peak resident set (VmHWM), CUDA
`max_memory_allocated`.

MFU uses verl's formula (`rl_engines.training.estimate_train_flops`: 6 * N * tokens + 12 * sum(seqlen^2) *
head_dim * heads * layers) over the device's dense bf16 peak (`peak_flops`); on a CPU the peak is unknown
and MFU is reported as n/a. A GPU run: `--device cuda --dtype bfloat16 --size 0.5b` (a Qwen2.5-0.5B-shaped
config built in code, random weights).

Last line: RESULT train_engine tokens_per_s=<engine 1-proc> ratio=<engine/plain> goal=0.9 met|missed
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time
import traceback
from pathlib import Path
from typing import Any

import torch
from _train_engine_sides import (
    SIZES,
    PlainLoop,
    build_engine,
    engine_step,
    hf_config,
    rollout_batch,
    workload,
)

GOAL_RATIO = 0.9
WARMUP_STEPS = 1
MEMORY_STEPS = 3
MIB = 2**20


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn: Any, device: torch.device) -> float:
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def _init_one_process_group(device: torch.device) -> None:
    """A world-size-1 process group, so the engine built next shards with FSDP2 (as under a launcher)."""
    import socket

    import torch.distributed as dist

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)


def _measure_one_process(args: argparse.Namespace) -> dict[str, Any]:
    """Alternate plain, engine (unsharded) and engine (FSDP2, world size 1) steps in this process; return
    their step seconds and the workload."""
    import torch.distributed as dist

    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    vocab = SIZES[args.size]["vocab_size"]
    batch, plan, normalizer = workload(args, vocab)
    runners = {"plain": PlainLoop(args, device).step}
    engine = build_engine(args)  # built before any process group exists: one unsharded process
    runners["engine"] = lambda b, p, n: engine_step(engine, b)
    if args.group_size > 1:
        padded = build_engine(args, share_prefixes=False)
        runners["engine-padded"] = lambda b, p, n: engine_step(padded, b)
    if args.fsdp_one:
        _init_one_process_group(device)
        sharded = build_engine(args)
        runners["engine-fsdp1"] = lambda b, p, n: engine_step(sharded, b)
    for run in runners.values():
        for _ in range(WARMUP_STEPS):
            run(batch, plan, normalizer)
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(args.reps):
        for name, run in runners.items():
            times[name].append(_timed(lambda run=run: run(batch, plan, normalizer), device))
    if dist.is_initialized():
        dist.destroy_process_group()
    lengths = batch["attention_mask"].sum(-1).tolist()
    return {"times": times, "tokens": sum(lengths), "lengths": lengths, "micro_batches": len(plan), "device": device}


def _dist_rank(rank: int, args: argparse.Namespace, port: int, out: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        vocab = SIZES[args.size]["vocab_size"]
        full = rollout_batch(args, args.batch, seed=args.seed, vocab=vocab)
        half = args.batch // 2
        batch = {k: v[rank * half : (rank + 1) * half] for k, v in full.items()}
        engine = build_engine(args)
        # The engine plans as many micro-batches on both ranks (FSDP2 pairs collectives per forward).
        engine_step(engine, batch)
        times = []
        for _ in range(args.reps):
            dist.barrier()
            times.append(_timed(lambda: engine_step(engine, batch), torch.device("cpu")))
        if rank == 0:
            Path(out).write_text(repr(statistics.median(times)))
    finally:
        dist.destroy_process_group()


def _measure_two_processes(args: argparse.Namespace) -> float:
    import socket
    import tempfile

    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "median.txt")
        mp.spawn(_dist_rank, args=(args, port, out), nprocs=2)
        return float(Path(out).read_text())


def _peak_child(variant: str, args: argparse.Namespace, sender: Any) -> None:
    try:
        device = torch.device(
            args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        )
        batch, plan, normalizer = workload(args, SIZES[args.size]["vocab_size"])
        runner = PlainLoop(args, device) if variant == "plain" else build_engine(args)
        for _ in range(MEMORY_STEPS):
            if variant == "plain":
                runner.step(batch, plan, normalizer)
            else:
                engine_step(runner, batch)
        if device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(device)
        else:
            status = Path("/proc/self/status").read_text().splitlines()
            peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
        sender.send(("ok", peak))
    except BaseException:
        sender.send(("error", traceback.format_exc()))


def _peak_memory(variant: str, args: argparse.Namespace) -> int:
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_peak_child, args=(variant, args, sender))
    process.start()
    status, payload = receiver.recv()
    process.join()
    if status != "ok":
        raise SystemExit(f"memory run of {variant} failed:\n{payload}")
    return int(payload)


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--size", default="tiny", choices=sorted(SIZES))
    parser.add_argument("--batch", type=int, default=8, help="sequences per step (even, for the 2-process run)")
    parser.add_argument("--max-len", type=int, default=192, help="prompt + response width")
    parser.add_argument("--budget", type=int, default=512, help="max tokens per micro-batch")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--group-size", type=int, default=1, help="rows sharing a prompt (a GRPO group); 1: every prompt distinct"
    )
    parser.add_argument(
        "--packing",
        choices=["auto", "true", "false"],
        default=None,
        help="the engine's micro_batch.packing (default: true with --group-size 1, else false; 'auto' packs only "
        "under a varlen attention kernel, as a user's default config does)",
    )
    parser.add_argument("--dist", action=argparse.BooleanOptionalAction, default=True, help="also run 2 processes")
    parser.add_argument(
        "--fsdp-one", action=argparse.BooleanOptionalAction, default=True, help="also time FSDP2 at world size 1"
    )
    parser.add_argument("--memory", action=argparse.BooleanOptionalAction, default=True, help="measure peak memory")
    args = parser.parse_args()
    if args.group_size < 1:
        parser.error("--group-size must be >= 1")
    return args


def main() -> None:
    from rl_engines.training import estimate_train_flops, mfu, peak_flops

    args = _parse()
    measured = _measure_one_process(args)
    device, tokens = measured["device"], measured["tokens"]
    medians = {name: statistics.median(times) for name, times in measured["times"].items()}
    rates = {name: tokens / seconds for name, seconds in medians.items()}
    ratio = rates["engine"] / rates["plain"]
    print(f"device={device} dtype={args.dtype} size={args.size} threads={torch.get_num_threads()}")
    print(f"batch: {args.batch} sequences, {tokens} valid tokens, {measured['micro_batches']} micro-batches "
          f"under {args.budget} tokens; {args.reps} alternating reps, medians")  # fmt: skip
    for name in medians:
        spread = ", ".join(f"{t:.3f}" for t in measured["times"][name])
        fastest = min(measured["times"][name])
        print(
            f"  {name:<12} {medians[name]:.3f} s/step  {rates[name]:,.0f} tokens/s  "
            f"(fastest {tokens / fastest:,.0f} tokens/s; runs: {spread})"
        )
    print(f"  engine/plain tokens/s ratio: {ratio:.3f} (one unsharded process)")
    if "engine-padded" in rates:
        gain = rates["engine"] / rates["engine-padded"]
        print(f"  engine/engine-padded ratio: {gain:.3f} (prompts shared by groups of {args.group_size} run once)")
    if "engine-fsdp1" in rates:
        print(f"  engine-fsdp1/plain ratio: {rates['engine-fsdp1'] / rates['plain']:.3f} (FSDP2, world size 1)")
    if args.dist and device.type == "cpu":
        seconds = _measure_two_processes(args)
        print(
            f"  engine, 2 gloo processes (FSDP2, 1 thread each): {seconds:.3f} s/step  {tokens / seconds:,.0f} tokens/s"
        )
    flops = estimate_train_flops(hf_config(args), measured["lengths"])
    peak = peak_flops() if device.type == "cuda" else None
    for name in medians:
        achieved = flops / medians[name]
        mfu_text = f"MFU {mfu(flops, medians[name], peak):.3f}" if peak else "MFU n/a (no known peak for this device)"
        print(f"  {name:<12} {achieved / 1e9:,.1f} GFLOP/s by verl's formula; {mfu_text}")
    if args.memory:
        for name in ("plain", "engine"):
            kind = "max_memory_allocated" if device.type == "cuda" else "peak RSS (VmHWM)"
            print(f"  {name:<12} {kind}: {_peak_memory(name, args) / MIB:,.0f} MiB (build + {MEMORY_STEPS} steps)")
    verdict = "met" if ratio >= GOAL_RATIO else "missed"
    print(f"RESULT train_engine tokens_per_s={rates['engine']:.0f} ratio={ratio:.3f} goal={GOAL_RATIO} {verdict}")


if __name__ == "__main__":
    main()
