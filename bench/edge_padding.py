"""What a coordinator edge's consumer pays to stack its samples: `stack_samples` (a plain `torch.stack` per field, what
`get_edge` ran before split placement could feed one training rank from several rollout ranks) against
`stack_padded` as `get_edge` runs it now (each field padded to the widest sample, then trimmed to the longest, when
the producers' widths differ).

Three cases, alternating A, B, C per repeat, medians:

- equal: 512 samples of one producer batch (every sample one width): `stack_samples` and `stack_padded`;
- mixed: 2 x 256 samples of two producer batches of different widths: `stack_padded` alone (`stack_samples`
  cannot stack them).

Rows are `build_rollout_batch`'s (prompts of 10-16 tokens, responses of 1-24) with the training side's per-token
floats added (15 fields, 10 of them (B, T)). The last line:

    RESULT edge_padding ms_equal=<stack_padded, equal> ratio=<stack_padded / stack_samples, equal> goal=1.5 met|missed
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Sequence

import torch

from rl_core.schema import (
    ADVANTAGES,
    INPUT_IDS,
    OLD_LOG_PROBS,
    REF_LOG_PROBS,
    RETURNS,
    TOKEN_LEVEL_REWARDS,
    TOKEN_LEVEL_SCORES,
)
from rl_engines.rollout import GenerateOutput
from rl_runtime.nodes import PromptItem
from rl_runtime.nodes._rollout_batch import build_rollout_batch
from rl_runtime.workers import StepData
from rl_runtime.workers._padding import stack_padded
from rl_runtime.workers._step_data import Sample, SampleBatch, stack_samples

GOAL = 1.5
"""stack_padded may cost at most this many times a plain stack when every sample has one width (the 1 + 1 case)."""
_TRAIN_FIELDS = (OLD_LOG_PROBS, REF_LOG_PROBS, ADVANTAGES, TOKEN_LEVEL_SCORES, TOKEN_LEVEL_REWARDS, RETURNS)


def _producer(rng: random.Random, count: int, first_uid: int, longest_prompt: int) -> StepData:
    prompts = [PromptItem(tuple(range(4, 4 + rng.randint(longest_prompt - 4, longest_prompt)))) for _ in range(count)]
    outputs = [GenerateOutput("r", tuple(range(rng.randint(1, 24))), None, "stop", 0, 0) for _ in range(count)]
    uids = list(range(first_uid, first_uid + count))
    data = build_rollout_batch(prompts, outputs, uids, [uid // 8 for uid in uids], policy_version=0)
    width = data.batch[INPUT_IDS].shape[1]
    batch = {**data.batch, **{name: torch.zeros(count, width) for name in _TRAIN_FIELDS}}
    return StepData(batch, data.extras)


def _edge_stack(samples: Sequence[Sample]) -> StepData:
    """What `get_edge` runs: trimmed only when the producers' widths differed."""
    return stack_padded(samples, always_trim=False)


def _samples(*parts: StepData) -> list[Sample]:
    batches = [SampleBatch(part, "bench") for part in parts]
    return [batch[i] for batch in batches for i in range(len(batch))]


def _ms(fn: Callable[[Sequence[Sample]], StepData], samples: Sequence[Sample]) -> float:
    start = time.perf_counter()
    fn(samples)
    return 1e3 * (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = random.Random(0)
    equal = _samples(_producer(rng, 512, 0, 16))
    first, second = _producer(rng, 256, 0, 14), _producer(rng, 256, 256, 16)
    mixed = _samples(first, second)
    plain, padded, padded_mixed = [], [], []
    for _ in range(args.repeats):
        plain.append(_ms(stack_samples, equal))
        padded.append(_ms(_edge_stack, equal))
        padded_mixed.append(_ms(_edge_stack, mixed))
    a, b, c = (statistics.median(values) for values in (plain, padded, padded_mixed))
    widths = f"{first.batch[INPUT_IDS].shape[1]}/{second.batch[INPUT_IDS].shape[1]}"
    print(f"equal widths, 512 samples: stack_samples {a:.2f} ms, stack_padded {b:.2f} ms")
    print(f"widths {widths}, 2 x 256 samples: stack_padded {c:.2f} ms")
    ratio = b / a
    print(f"RESULT edge_padding ms_equal={b:.2f} ratio={ratio:.2f} goal={GOAL} {'met' if ratio <= GOAL else 'missed'}")


if __name__ == "__main__":
    main()
