"""Sequence-length balancing across data-parallel ranks: balance quality and Karmarkar–Karp speed against verl.

Workload: 8192 samples = 512 prompts x 16 responses, token lengths from a *grouped* lognormal:
    log L[p, s] = log(1000) + B[p] + E[p, s],   B[p] ~ N(0, 0.8²) per prompt,  E[p, s] ~ N(0, 0.6²) per sample,
so every length is lognormal with median 1000 and sigma 1 (0.8² + 0.6² = 1), while the 16 responses of one
prompt share the prompt's base length B[p] (correlation 0.64 in log space, as responses to one prompt are
alike). Lengths are rounded and clipped to [1, 20000]; Python's `random.Random(seed)` makes them reproducible.

For dp = 8, 16, 64 (equal-size: every rank gets 8192 / dp samples; workload = token count), the table gives
max/mean load of
    contiguous   rank r gets samples [r·n/dp, (r+1)·n/dp) (no balancing),
    lpt          rl_core.balancing.greedy_lpt,
    kk_plain     rl_core.balancing.karmarkar_karp(refine=False), the differencing alone,
    kk           rl_core.balancing.karmarkar_karp (default: differencing + swap refinement),
    verl         verl.utils.seqlen_balancing.get_seqlen_balanced_partitions(equal_size=True) (verl 0.9.1),
and the wall time of one kk call against one verl call on the same lengths. verl runs in its own interpreter
(--verl-python, default $VERL_PYTHON, then /opt/verl/bin/python) as a long-lived worker that reads the lengths
from a temporary JSON file and times one call per request; the calls alternate ours, verl, ours, verl, ...
(--repeats each, after one warm-up each) and the medians are reported.

Last two lines:
    balance max/mean dp64 kk=<x> verl=<y> goal=1.005 met|missed
    RESULT balance kk_ms_dp64=<ours> ratio=<verl_ms / ours_ms at dp 64> goal=2 met|missed
When verl cannot be run the ratio is printed as n/a and marked missed.

Run: python bench/balance.py [--repeats 7] [--seed 0] [--verl-python PATH]   (about 10 s on 2 CPU cores)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rl_core.balancing import greedy_lpt, karmarkar_karp, max_over_mean

PROMPTS, PER_PROMPT = 512, 16
MEDIAN_TOKENS, SIGMA, PROMPT_SIGMA, MAX_TOKENS = 1000, 1.0, 0.8, 20000
DP_SIZES = (8, 16, 64)
GOAL_RATIO = 2.0
"""Our KK must be at least twice as fast as verl's at dp 64."""
GOAL_MAX_OVER_MEAN = 1.005
"""The heaviest rank may carry at most 0.5 % more tokens than the mean at dp 64."""
DEFAULT_VERL_PYTHON = "/opt/verl/bin/python"

# The verl side: load the lengths once, then answer one timed call per "k" line with a JSON line.
_VERL_WORKER = """
import json, sys, time
from verl.utils.seqlen_balancing import get_seqlen_balanced_partitions
lengths = json.load(open(sys.argv[1]))
print("ready", flush=True)
for line in sys.stdin:
    k = int(line)
    start = time.perf_counter()
    parts = get_seqlen_balanced_partitions(lengths, k, equal_size=True)
    ms = (time.perf_counter() - start) * 1e3
    loads = [sum(lengths[i] for i in p) for p in parts]
    print(json.dumps({"ms": ms, "max_over_mean": max(loads) * len(loads) / sum(loads)}), flush=True)
"""


def grouped_lognormal_lengths(seed: int) -> list[int]:
    """PROMPTS x PER_PROMPT token lengths, prompt-major (samples of one prompt are adjacent); see the module doc."""
    rng = random.Random(seed)
    sample_sigma = math.sqrt(SIGMA**2 - PROMPT_SIGMA**2)
    lengths = []
    for _ in range(PROMPTS):
        base = math.log(MEDIAN_TOKENS) + rng.gauss(0.0, PROMPT_SIGMA)
        for _ in range(PER_PROMPT):
            lengths.append(min(MAX_TOKENS, max(1, round(math.exp(base + rng.gauss(0.0, sample_sigma))))))
    return lengths


def contiguous_max_over_mean(lengths: list[int], dp: int) -> float:
    size = len(lengths) // dp
    return max_over_mean([sum(lengths[r * size : (r + 1) * size]) for r in range(dp)])


class VerlWorker:
    """verl's get_seqlen_balanced_partitions in its own interpreter, one timed call per request."""

    def __init__(self, python: str, lengths_file: str) -> None:
        self.proc = subprocess.Popen(
            [python, "-c", _VERL_WORKER, lengths_file],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if line.strip() != "ready":
            err = self.proc.stderr.read() if self.proc.stderr else ""
            self.proc.kill()
            raise RuntimeError(f"verl worker did not start: {line.strip()} {err.strip()[-500:]}")

    def run(self, k: int) -> dict[str, float]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(f"{k}\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def time_ours(lengths: list[int], dp: int) -> float:
    start = time.perf_counter()
    karmarkar_karp(lengths, dp, equal_size=True)
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed calls per implementation and dp (>= 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--verl-python", default=os.environ.get("VERL_PYTHON", DEFAULT_VERL_PYTHON), help="interpreter with verl"
    )
    args = parser.parse_args()
    repeats = max(5, args.repeats)
    lengths = grouped_lognormal_lengths(args.seed)
    print(
        f"{len(lengths)} samples ({PROMPTS} prompts x {PER_PROMPT}), grouped lognormal (median {MEDIAN_TOKENS}, "
        f"sigma {SIGMA}, prompt sigma {PROMPT_SIGMA}, clipped at {MAX_TOKENS}): mean {statistics.mean(lengths):.0f}, "
        f"max {max(lengths)} tokens; seed {args.seed}; {repeats} alternating repeats, medians\n"
    )

    worker = None
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(lengths, handle)
    try:
        if Path(args.verl_python).exists():
            try:
                worker = VerlWorker(args.verl_python, handle.name)
            except (RuntimeError, OSError) as exc:
                print(f"verl unavailable ({exc}); the speed ratio is marked missed")
        else:
            print(f"verl unavailable: no interpreter at {args.verl_python}; the speed ratio is marked missed")

        header = f"{'dp':>4} {'contiguous':>11} {'lpt':>9} {'kk_plain':>9} {'kk':>9} {'verl':>9}"
        print(header + f" {'kk ms':>8} {'verl ms':>8} {'verl/kk':>8}")
        summary: dict[str, float] = {}
        for dp in DP_SIZES:
            lpt = greedy_lpt(lengths, dp, equal_size=True).max_over_mean
            plain = karmarkar_karp(lengths, dp, equal_size=True, refine=False).max_over_mean
            ours = karmarkar_karp(lengths, dp, equal_size=True).max_over_mean
            time_ours(lengths, dp)  # warm-up
            verl_balance = worker.run(dp)["max_over_mean"] if worker else float("nan")
            ours_ms, verl_ms = [], []
            for _ in range(repeats):
                ours_ms.append(time_ours(lengths, dp))
                if worker:
                    verl_ms.append(worker.run(dp)["ms"])
            ours_med = statistics.median(ours_ms)
            verl_med = statistics.median(verl_ms) if verl_ms else float("nan")
            row = f"{dp:>4} {contiguous_max_over_mean(lengths, dp):>11.6f} {lpt:>9.6f} {plain:>9.6f} {ours:>9.6f}"
            print(row + f" {verl_balance:>9.6f} {ours_med:>8.2f} {verl_med:>8.2f} {verl_med / ours_med:>8.2f}")
            summary = {"ours": ours, "verl": verl_balance, "ours_ms": ours_med, "verl_ms": verl_med}
    finally:
        if worker:
            worker.close()
        os.unlink(handle.name)

    balance_met = summary["ours"] <= GOAL_MAX_OVER_MEAN
    print(
        f"\nbalance max/mean dp64 kk={summary['ours']:.6f} verl={summary['verl']:.6f} "
        f"goal={GOAL_MAX_OVER_MEAN} {'met' if balance_met else 'missed'}"
    )
    if worker:
        ratio = summary["verl_ms"] / summary["ours_ms"]
        verdict = "met" if ratio >= GOAL_RATIO else "missed"
        print(f"RESULT balance kk_ms_dp64={summary['ours_ms']:.2f} ratio={ratio:.2f} goal={GOAL_RATIO:g} {verdict}")
    else:
        print(f"RESULT balance kk_ms_dp64={summary['ours_ms']:.2f} ratio=n/a goal={GOAL_RATIO:g} missed")


if __name__ == "__main__":
    sys.exit(main())
