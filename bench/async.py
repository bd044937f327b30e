"""Asynchronous vs synchronous training, measured: the embedded GRPO recipe on 2 CPU slots in split placement.

Runs `rl-recipes train grpo placement.colocate=false algorithm.max_staleness=<eta>` for eta = 0, 1, 2, alternating
(0, 1, 2, 2, 1, 0, ... for `--rounds`), each run `--steps` steps with no validation or checkpoint in between (the
pipeline drains only at the end), in one work folder whose short SFT warm start is made once. eta > 0 runs use
`decoupled_ppo`, eta = 0 the recipe's `ppo`.

Workload: the embedded recipe's own (64 prompts x 8 samples a step, responses of up to 24 tokens from the warm
started model), NOT the heavy-tailed grouped lognormal one of issue 25: the embedded model's lengths cannot be set.

Per run, from its metrics.jsonl, over the steps after the first (pipeline fill): samples/s = samples per step /
mean `timing_s/step`; the training slot's idle ratio = `timing_s/wait_coordinator_inputs` over its nodes' time, the
rollout slot's = `timing_s/receive_weights` (plus the final catch-up) over its nodes' time. Prints the medians per eta
over the rounds and the ratio to eta = 0 (compare it with bench/async_sim.py's 2-slot prediction).
Last line: RESULT async samples_per_s_eta1=<x> ratio_eta1=<r> goal=1.6 met|missed
Run: python bench/async.py [--workdir DIR] [--steps 6] [--rounds 1]   (a few minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ETAS = (0, 1, 2)
GOAL = 1.6
SAMPLES_PER_STEP = 64 * 8
ROLLOUT_NODES = ("rollout_actor", "function_reward", "receive_weights")
TRAIN_NODES = ("calculate_advantages", "actor_old_log_prob", "reference_log_prob", "actor_train")


def _cli(workdir: Path, *args: str) -> None:
    command = [sys.executable, "-c", "from rl_recipes.cli import main; main()", *args]
    subprocess.run(command, cwd=workdir, env=dict(os.environ), check=True)


def _run(workdir: Path, eta: int, steps: int, index: int) -> Path:
    out = workdir / "runs" / f"async_{index}_eta{eta}"
    overrides = [
        "placement.colocate=false",
        f"algorithm.max_staleness={eta}",
        f"trainer.total_steps={steps}",
        "trainer.validate_before_train=false",
        "trainer.validate_every=0",
        "trainer.checkpoint_every=0",
        "trainer.resume=never",
        "trainer.log_sinks=[jsonl]",
        f"trainer.output_dir={out}",
        "warm_start=null",
    ]
    if eta > 0:
        overrides.append("algorithm.policy_loss=decoupled_ppo")
    _cli(workdir, "train", "grpo", *overrides)
    found = sorted(out.rglob("metrics.jsonl"))
    if not found:
        raise SystemExit(f"no metrics.jsonl under {out}")
    return found[-1]


def _ratio(row: dict[str, float], waited: float, nodes: tuple[str, ...]) -> float:
    total = sum(row.get(f"timing_s/{node}", 0.0) for node in nodes) + row.get("timing_s/catch_up_weights", 0.0)
    return waited / total if total > 0 else 0.0


def _measure(path: Path) -> dict[str, float]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()][1:]
    seconds = statistics.mean(row["timing_s/step"] for row in rows)
    trainer = [_ratio(row, row.get("timing_s/wait_coordinator_inputs", 0.0), TRAIN_NODES) for row in rows]
    rollout = [
        _ratio(row, row.get("timing_s/receive_weights", 0.0) + row.get("timing_s/catch_up_weights", 0.0), ROLLOUT_NODES)
        for row in rows
    ]
    return {
        "samples_per_s": SAMPLES_PER_STEP / seconds,
        "trainer_idle": statistics.mean(trainer),
        "rollout_idle": statistics.mean(rollout),
        "staleness_max": max(row.get("async/staleness_max", 0.0) for row in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="async_bench_"))
    workdir.mkdir(parents=True, exist_ok=True)
    if not (workdir / "runs/embedded/sft/model").exists():
        _cli(workdir, "sft", "steps=20")
    order = [eta for r in range(args.rounds) for eta in (ETAS if r % 2 == 0 else ETAS[::-1])]
    results: dict[int, list[dict[str, float]]] = {eta: [] for eta in ETAS}
    for index, eta in enumerate(order):
        start = time.perf_counter()
        measured = _measure(_run(workdir, eta, args.steps, index))
        results[eta].append(measured)
        print(f"run {index}: eta={eta} {measured} ({time.perf_counter() - start:.0f} s with start-up)", flush=True)
    base = statistics.median(m["samples_per_s"] for m in results[0])
    for eta in ETAS:
        med = {key: statistics.median(m[key] for m in results[eta]) for key in results[eta][0]}
        print(
            f"eta={eta}: {med['samples_per_s']:.1f} samples/s ({med['samples_per_s'] / base:.2f}x), trainer idle "
            f"{med['trainer_idle']:.2f}, rollout idle {med['rollout_idle']:.2f}, "
            f"staleness max {med['staleness_max']:.0f}"
        )
    eta1 = statistics.median(m["samples_per_s"] for m in results[1])
    status = "met" if eta1 / base >= GOAL else "missed"
    print(f"RESULT async samples_per_s_eta1={eta1:.1f} ratio_eta1={eta1 / base:.2f} goal={GOAL} {status}")


if __name__ == "__main__":
    main()
