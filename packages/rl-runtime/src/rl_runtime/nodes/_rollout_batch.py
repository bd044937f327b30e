"""Turning prompts and the engine's outputs into the step's sample batch (right-padded, schema names)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rl_core.schema import (
    ATTENTION_MASK,
    GROUP_ID,
    INPUT_IDS,
    POLICY_VERSION,
    PROMPT_LEN,
    RESPONSE_LEN,
    RESPONSE_MASK,
    ROLLOUT_LOG_PROBS,
    UID,
)
from rl_engines.rollout import GenerateOutput
from rl_runtime.nodes._task import PromptItem
from rl_runtime.workers import StepData, StepDataError
from rl_runtime.workers._padding import PAD_VALUE, pad_cat

PAD_ID = PAD_VALUE
"""Token id written into padding; never read, since every consumer masks padding out."""
FINISH_REASON_KEY = "finish_reason"


def build_rollout_batch(
    prompts: Sequence[PromptItem],
    outputs: Sequence[GenerateOutput],
    uids: Sequence[int],
    group_ids: Sequence[int],
    policy_version: int,
) -> StepData:
    """One StepData of `len(outputs)` samples; sample i is `prompts[i]` followed by `outputs[i]`.

    Rows are `[prompt | response | padding]`: `input_ids`, `attention_mask`, `response_mask`,
    `rollout_log_probs` are `(B, T)` with `T` the longest prompt + response; `prompt_len`, `response_len`,
    `uid`, `group_id`, `policy_version` are `(B,)`. Extras: each prompt's extras per sample, plus the
    engine's finish reason.
    """
    if not (len(prompts) == len(outputs) == len(uids) == len(group_ids)) or not outputs:
        raise StepDataError(
            f"a rollout batch needs as many prompts, outputs, uids and group ids (and at least one): got "
            f"{len(prompts)}, {len(outputs)}, {len(uids)}, {len(group_ids)}"
        )
    prompt_lens = torch.tensor([len(p.prompt_ids) for p in prompts], dtype=torch.int64)
    response_lens = torch.tensor([len(o.output_ids) for o in outputs], dtype=torch.int64)
    lengths = prompt_lens + response_lens
    size, width = len(outputs), int(lengths.max())
    # Filled through masks in one pass each: per-row slice assignments took 0.46 ms for 32 short rows (now 0.16).
    columns = torch.arange(width)
    valid = columns < lengths[:, None]
    in_response = valid & (columns >= prompt_lens[:, None])
    input_ids = torch.full((size, width), PAD_ID, dtype=torch.int64)
    input_ids[valid] = torch.tensor(
        [
            token
            for prompt, output in zip(prompts, outputs, strict=True)
            for token in (*prompt.prompt_ids, *output.output_ids)
        ],
        dtype=torch.int64,
    )
    rollout_log_probs = torch.zeros((size, width), dtype=torch.float32)
    has_log_probs = torch.tensor([o.output_logprobs is not None for o in outputs])
    rollout_log_probs[in_response & has_log_probs[:, None]] = torch.tensor(
        [value for output in outputs if output.output_logprobs is not None for value in output.output_logprobs],
        dtype=torch.float32,
    )
    attention_mask, response_mask = valid.long(), in_response.long()
    batch = {
        INPUT_IDS: input_ids,
        ATTENTION_MASK: attention_mask,
        RESPONSE_MASK: response_mask,
        ROLLOUT_LOG_PROBS: rollout_log_probs,
        PROMPT_LEN: prompt_lens,
        RESPONSE_LEN: response_lens,
        UID: torch.tensor(list(uids), dtype=torch.int64),
        GROUP_ID: torch.tensor(list(group_ids), dtype=torch.int64),
        POLICY_VERSION: torch.full((size,), policy_version, dtype=torch.int64),
    }
    names = sorted({name for prompt in prompts for name in prompt.extras})
    extras: dict[str, list[object]] = {name: [prompt.extras.get(name) for prompt in prompts] for name in names}
    extras[FINISH_REASON_KEY] = [output.finish_reason for output in outputs]
    return StepData(batch, extras)


def select_samples(data: StepData, rows: Sequence[int] | torch.Tensor) -> StepData:
    """The samples `rows` of `data` (tensors and per-sample extras), in the given order; metrics are dropped."""
    index = torch.as_tensor(rows, dtype=torch.int64)
    batch = {name: tensor[index] for name, tensor in data.batch.items()}
    positions = index.tolist()
    extras = {name: [values[i] for i in positions] for name, values in data.extras.items()}
    return StepData(batch, extras)


def concat_samples(parts: Sequence[StepData]) -> StepData:
    """The samples of `parts` one after another, each field right-padded with PAD_ID to its widest part.

    Every multi-dim field is padded at the end of its dim 1 (a `(B, T)` field to the longest `T` among the parts,
    a `(B, L)` one to its own longest `L`); padding holds 0, as in `build_rollout_batch`. Parts that differ in any
    later dim (an image size, an action chunk) are refused: no producer pads those.
    """
    if not parts:
        raise StepDataError("concat_samples needs at least one StepData")
    batch = {name: pad_cat(name, [part.batch[name] for part in parts]) for name in parts[0].batch}
    extras = {name: [value for part in parts for value in part.extras[name]] for name in parts[0].extras}
    return StepData(batch, extras)
