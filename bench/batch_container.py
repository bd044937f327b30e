"""Today's StepData (a frozen dict of tensors) vs tensordict.TensorDict on what the training path does with a batch.

Each operation runs the way the code does it today on a StepData (`rl_runtime.workers.StepData`,
`select_samples`/`concat_samples` of `rl_runtime.nodes._rollout_batch`, `select_rows` of
`rl_engines.training._micro_batches`) and the way it would run on a `TensorDict(batch_size=[B])` keyed by the
same `rl_core.schema` names:

- build: the container from the rollout's and the trainer's tensors (17 schema fields, 16 of them (B, T));
- select: a permutation of the rows (rebalancing, dynamic sampling);
- micro: the rows split into micro-batches of 8 by index lists (what `select_rows` does per micro-batch);
- concat: parts of equal width back into one batch (the coordinator's stacked reads, equal widths so that
  TensorDict's `torch.cat` needs no padding; `concat_samples` pads);
- pickle: `pickle.dumps` + `loads` (protocol 5), how Ray and the coordinator ship a batch;
- cat (not in the total): concat without padding on both sides (`torch.cat` per field for StepData), to tell the
  container's cost from `concat_samples`' padding, which it applies to every part even at equal widths.

Medians of `--repeats` alternating runs (StepData, TensorDict, StepData, ...) per size. The last line:

    RESULT batch_container us_per_batch=<StepData, all operations, B=<middle size>> ratio=<TensorDict / StepData>
    goal=1 met|missed

`met` means StepData is at least as fast as TensorDict over the five operations at the middle size.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time
from collections.abc import Callable

import torch
from tensordict import TensorDict

from rl_core import schema
from rl_runtime.nodes._rollout_batch import concat_samples, select_samples
from rl_runtime.workers import StepData

GOAL_RATIO = 1.0
MICRO_ROWS = 8
OPERATIONS = ("build", "select", "micro", "concat", "pickle")
EXTRA = ("cat",)


def make_tensors(batch_size: int, width: int) -> dict[str, torch.Tensor]:
    """A training batch after the advantage node: the rollout's fields plus log-probs, values and advantages."""
    tokens = (batch_size, width)
    integer = {
        schema.INPUT_IDS: torch.randint(0, 32000, tokens),
        schema.ATTENTION_MASK: torch.ones(tokens, dtype=torch.int64),
        schema.RESPONSE_MASK: torch.ones(tokens, dtype=torch.int64),
        schema.POSITION_IDS: torch.arange(width).expand(tokens).contiguous(),
    }
    floating = {
        name: torch.randn(tokens)
        for name in (
            schema.ROLLOUT_LOG_PROBS,
            schema.OLD_LOG_PROBS,
            schema.REF_LOG_PROBS,
            schema.VALUES,
            schema.TOKEN_LEVEL_SCORES,
            schema.TOKEN_LEVEL_REWARDS,
            schema.ADVANTAGES,
            schema.RETURNS,
        )
    }
    sequence = {
        schema.PROMPT_LEN: torch.full((batch_size,), width // 4),
        schema.RESPONSE_LEN: torch.full((batch_size,), width - width // 4),
        schema.UID: torch.arange(batch_size),
        schema.GROUP_ID: torch.arange(batch_size) // 8,
        schema.POLICY_VERSION: torch.zeros(batch_size, dtype=torch.int64),
    }
    return {**integer, **floating, **sequence}


def _micro_plan(batch_size: int) -> list[list[int]]:
    order = torch.randperm(batch_size).tolist()
    return [order[i : i + MICRO_ROWS] for i in range(0, batch_size, MICRO_ROWS)]


def stepdata_ops(tensors: dict[str, torch.Tensor]) -> dict[str, Callable[[], object]]:
    """The five operations on a StepData, as the code does them today."""
    batch_size = next(iter(tensors.values())).shape[0]
    data = StepData(tensors)
    perm = torch.randperm(batch_size)
    plan = _micro_plan(batch_size)
    parts = [StepData({k: v[i : i + MICRO_ROWS] for k, v in tensors.items()}) for i in range(0, batch_size, MICRO_ROWS)]

    def micro() -> object:
        out = []
        for rows in plan:
            index = torch.as_tensor(rows, dtype=torch.int64)
            out.append({key: tensor[index] for key, tensor in data.batch.items()})
        return out

    return {
        "build": lambda: StepData(tensors),
        "select": lambda: select_samples(data, perm),
        "micro": micro,
        "concat": lambda: concat_samples(parts),
        "pickle": lambda: pickle.loads(pickle.dumps(data, protocol=5)),
        "cat": lambda: StepData({name: torch.cat([part.batch[name] for part in parts]) for name in data.batch}),
    }


def tensordict_ops(tensors: dict[str, torch.Tensor]) -> dict[str, Callable[[], object]]:
    """The same five operations on a TensorDict with batch_size [B]."""
    batch_size = next(iter(tensors.values())).shape[0]
    data = TensorDict(tensors, batch_size=[batch_size])
    perm = torch.randperm(batch_size)
    plan = _micro_plan(batch_size)
    parts = list(data.split(MICRO_ROWS))

    def micro() -> object:
        return [data[torch.as_tensor(rows, dtype=torch.int64)] for rows in plan]

    return {
        "build": lambda: TensorDict(tensors, batch_size=[batch_size]),
        "select": lambda: data[perm],
        "micro": micro,
        "concat": lambda: torch.cat(parts),
        "pickle": lambda: pickle.loads(pickle.dumps(data, protocol=5)),
        "cat": lambda: torch.cat(parts),
    }


def _time(fn: Callable[[], object], inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - start) / inner * 1e6


def measure(batch_size: int, width: int, repeats: int) -> dict[str, dict[str, float]]:
    """Median microseconds per operation for each container, alternating the two."""
    tensors = make_tensors(batch_size, width)
    sides = {"StepData": stepdata_ops(tensors), "TensorDict": tensordict_ops(tensors)}
    _check_same_results(tensors)
    inner = max(1, 4096 // batch_size)
    samples: dict[str, dict[str, list[float]]] = {side: {op: [] for op in OPERATIONS + EXTRA} for side in sides}
    for ops in sides.values():  # warm-up
        for op in OPERATIONS + EXTRA:
            ops[op]()
    for _ in range(repeats):
        for side, ops in sides.items():
            for op in OPERATIONS + EXTRA:
                samples[side][op].append(_time(ops[op], inner))
    return {side: {op: statistics.median(values) for op, values in ops.items()} for side, ops in samples.items()}


def _check_same_results(tensors: dict[str, torch.Tensor]) -> None:
    """Both sides select the same rows: the comparison is between equal work."""
    batch_size = next(iter(tensors.values())).shape[0]
    perm = torch.randperm(batch_size)
    ours = select_samples(StepData(tensors), perm).batch
    theirs = TensorDict(tensors, batch_size=[batch_size])[perm]
    for name, tensor in ours.items():
        if not torch.equal(tensor, theirs[name]):
            raise AssertionError(f"{name}: StepData and TensorDict selected different rows")


def main() -> None:
    """Print a table per size and the RESULT line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 256, 2048], help="batch sizes B")
    parser.add_argument("--width", type=int, default=512, help="tokens per row T")
    parser.add_argument("--repeats", type=int, default=7, help="alternating runs per size (medians)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: as a DAG worker of one core)")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    totals = {}
    print(
        f"us per operation, T={args.width}, {len(make_tensors(1, 1))} fields, micro-batches of {MICRO_ROWS} rows, "
        f"{args.threads} torch thread(s)"
    )
    print(f"{'B':>6} {'container':>10} " + " ".join(f"{op:>9}" for op in OPERATIONS) + f" {'total':>10} {'cat':>9}")
    for batch_size in args.sizes:
        result = measure(batch_size, args.width, args.repeats)
        for side, ops in result.items():
            total = sum(ops[op] for op in OPERATIONS)
            totals[(batch_size, side)] = total
            row = " ".join(f"{ops[op]:>9.1f}" for op in OPERATIONS)
            print(f"{batch_size:>6} {side:>10} {row} {total:>10.1f} {ops['cat']:>9.1f}")
        ratios = {op: result["TensorDict"][op] / result["StepData"][op] for op in OPERATIONS + EXTRA}
        total_ratio = totals[(batch_size, "TensorDict")] / totals[(batch_size, "StepData")]
        row = " ".join(f"{ratios[op]:>9.2f}" for op in OPERATIONS)
        print(f"{batch_size:>6} {'TD/SD':>10} {row} {total_ratio:>10.2f} {ratios['cat']:>9.2f}")
    middle = args.sizes[len(args.sizes) // 2]
    ours, theirs = totals[(middle, "StepData")], totals[(middle, "TensorDict")]
    ratio = theirs / ours
    verdict = "met" if ratio >= GOAL_RATIO else "missed"
    print(f"RESULT batch_container us_per_batch={ours:.1f} ratio={ratio:.2f} goal={GOAL_RATIO:g} {verdict}")


if __name__ == "__main__":
    main()
