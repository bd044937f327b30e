"""The sample schema: every tensor a sample carries, named once, with its dtype and shape.

Every layer names a sample's tensors through these constants (`batch[schema.RESPONSE_MASK]`), never
through a string literal: `tools/check_sample_fields.py` (run by `nox -s lint`) fails on a literal equal
to a field name anywhere in the package sources outside this module. Each field has a `FieldSpec` in
`SAMPLE_FIELDS`: its allowed dtypes, its symbolic shape and whether it is per-token, per-sequence or
per-step. `check_sample` checks a mapping of tensors against them; the runtime's graph executor runs it on
the tensors each node makes, before they travel on (`rl_runtime.workers._step_data.check_node_output`, under
0.02 % of an embedded-default step), so a wrong dtype, rank or size is named at the node that made it.

Symbols: `B` samples, `T` tokens (prompt + response, right-padded; in an embodied sample the `S * A` action tokens
its policy emitted, flattened), `L` tokens of an embodied sample's instruction, `S` environment steps of an
embodied episode, `A` action tokens per step, `C`, `H`, `W` image channels, height and width. An embodied sample
carries its instruction in `instruction_ids` / `instruction_mask`, not in `input_ids`: its token-level fields
(`response_mask`, `old_log_probs`, `advantages`, ...) cover the action tokens only.

Fields marked reserved are named for the features coming next (vision-language-action rollouts, multi-turn
agents, partial rollouts across weight updates); no producer writes them yet, and a consumer that needs
one should take it from here rather than invent a name.

Non-tensor extras (prompt text, ground truth, environment info) travel in a separate mapping, never in
the tensor container.

The container above rl-core stays a plain mapping of these names to tensors (`rl_runtime.workers.StepData`),
not a `tensordict.TensorDict`. `bench/batch_container.py` ran both on what the training path does with a
batch (build, select rows, split into micro-batches, concat, pickle). Neither total was clearly ahead:
TensorDict was slower at building, selecting and micro-batching (its per-call overhead), about even on
pickling, and won only on concat, and only because `concat_samples` pads every part. That is no clear win,
so a new dependency for rl-runtime and rl-engines plus a second indexing API is not worth it.
bench/README.md has the figures and what a switch would take.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

import torch

from rl_core._errors import ShapeError, UnknownNameError
from rl_core._registry import nearest_name
from rl_core._validation import check_tensor

__all__ = [
    "ACTION_TOKENS",
    "ADVANTAGES",
    "ATTENTION_MASK",
    "BASELINE_REWARDS",
    "FINISH_STEP",
    "GROUP_ID",
    "INERT_ROWS",
    "INPUT_IDS",
    "INSTRUCTION_IDS",
    "INSTRUCTION_MASK",
    "LOSS_MASK",
    "OLD_LOG_PROBS",
    "PIXEL_VALUES",
    "POLICY_VERSION",
    "POSITION_IDS",
    "PROMPT_LEN",
    "REF_LOG_PROBS",
    "RESPONSE_LEN",
    "RESPONSE_MASK",
    "RETURNS",
    "ROLLOUT_LOG_PROBS",
    "SAMPLE_FIELDS",
    "TOKEN_LEVEL_REWARDS",
    "TOKEN_LEVEL_SCORES",
    "TOKEN_POLICY_VERSION",
    "TURN_ID",
    "UID",
    "VALUES",
    "FieldSpec",
    "check_sample",
]

# The names. Only field names are assigned to module-level string constants here: the lint check reads them.
INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
POSITION_IDS = "position_ids"
RESPONSE_MASK = "response_mask"
PROMPT_LEN = "prompt_len"
RESPONSE_LEN = "response_len"
OLD_LOG_PROBS = "old_log_probs"
REF_LOG_PROBS = "ref_log_probs"
ROLLOUT_LOG_PROBS = "rollout_log_probs"
VALUES = "values"
TOKEN_LEVEL_SCORES = "token_level_scores"
TOKEN_LEVEL_REWARDS = "token_level_rewards"
ADVANTAGES = "advantages"
RETURNS = "returns"
UID = "uid"
GROUP_ID = "group_id"
POLICY_VERSION = "policy_version"
BASELINE_REWARDS = "baseline_rewards"
INERT_ROWS = "inert_rows"
# Reserved for the next features.
LOSS_MASK = "loss_mask"
TOKEN_POLICY_VERSION = "token_policy_version"
TURN_ID = "turn_id"
PIXEL_VALUES = "pixel_values"
ACTION_TOKENS = "action_tokens"
INSTRUCTION_IDS = "instruction_ids"
INSTRUCTION_MASK = "instruction_mask"
FINISH_STEP = "finish_step"

Level = Literal["token", "sequence", "step", "instruction"]
"""`token`: one value per token, `(B, T)`; `sequence`: one per sample, `(B,)`; `step`: per environment step;
`instruction`: per token of an embodied sample's language instruction, `(B, L)`."""

_FLOAT = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
_INDEX = (torch.int64, torch.int32)
_MASK = (torch.bool, torch.int64, torch.int32, torch.uint8)
_ID = (torch.int64,)


@dataclass(frozen=True)
class FieldSpec:
    """One sample field: name, allowed dtypes (the first is what producers write), symbolic shape, level, doc."""

    name: str
    dtypes: tuple[torch.dtype, ...]
    shape: tuple[str, ...]
    level: Level
    doc: str
    reserved: bool = False
    """True for a field named for a coming feature that no producer writes yet."""


_FIELDS: dict[str, FieldSpec] = {}


def _field(
    name: str,
    dtypes: tuple[torch.dtype, ...],
    shape: tuple[str, ...],
    level: Level,
    doc: str,
    *,
    reserved: bool = False,
) -> None:
    if name in _FIELDS:
        raise ValueError(f"sample field {name!r} is declared twice in rl_core.schema")
    _FIELDS[name] = FieldSpec(name, dtypes, shape, level, doc, reserved)


_TOKENS = ("B", "T")
_SEQUENCE = ("B",)
_field(INPUT_IDS, _INDEX, _TOKENS, "token", "prompt then response token ids, right-padded")
_field(ATTENTION_MASK, _MASK, _TOKENS, "token", "1 on real tokens (prompt and response), 0 on padding")
_field(POSITION_IDS, _INDEX, _TOKENS, "token", "position of each token; absent means 0.. along the real tokens")
_field(RESPONSE_MASK, _MASK, _TOKENS, "token", "1 on the response tokens the loss and the advantages cover")
_field(PROMPT_LEN, _ID, _SEQUENCE, "sequence", "prompt tokens of each sample")
_field(RESPONSE_LEN, _ID, _SEQUENCE, "sequence", "response tokens of each sample")
_field(OLD_LOG_PROBS, _FLOAT, _TOKENS, "token", "log-probs of the tokens under the actor before this update")
_field(REF_LOG_PROBS, _FLOAT, _TOKENS, "token", "log-probs of the tokens under the reference policy (KL)")
_field(ROLLOUT_LOG_PROBS, _FLOAT, _TOKENS, "token", "log-probs the inference engine reported while sampling")
_field(VALUES, _FLOAT, _TOKENS, "token", "critic's value estimate at each token")
_field(TOKEN_LEVEL_SCORES, _FLOAT, _TOKENS, "token", "reward function's score, placed on the response tokens")
_field(TOKEN_LEVEL_REWARDS, _FLOAT, _TOKENS, "token", "scores after the in-reward KL penalty")
_field(ADVANTAGES, _FLOAT, _TOKENS, "token", "advantage of each response token")
_field(RETURNS, _FLOAT, _TOKENS, "token", "return of each response token (the critic's target)")
_field(UID, _ID, _SEQUENCE, "sequence", "unique id of the sample")
_field(GROUP_ID, _ID, _SEQUENCE, "sequence", "id shared by the samples of one prompt (GRPO siblings)")
_field(POLICY_VERSION, _ID, _SEQUENCE, "sequence", "version of the weights that generated the response")
_field(BASELINE_REWARDS, _FLOAT, _SEQUENCE, "sequence", "score of a greedy response to the sample's prompt (ReMax)")
_field(
    INERT_ROWS,
    (torch.bool,),
    _SEQUENCE,
    "sequence",
    "true on rows whose loss and gradient are zero whatever the model outputs (the actor's zero-advantage rows "
    "under a loss that is a multiple of the advantage); a training engine may run their forward without autograd",
)
_field(
    LOSS_MASK,
    _MASK,
    _TOKENS,
    "token",
    "1 on the tokens the loss covers when that is not the whole response (multi-turn: the model's own turns)",
    reserved=True,
)
_field(
    TOKEN_POLICY_VERSION,
    _ID,
    _TOKENS,
    "token",
    "weight version of each token, for responses sampled across a weight update (partial rollouts)",
    reserved=True,
)
_field(TURN_ID, _ID, _TOKENS, "token", "turn each token belongs to in a multi-turn episode (0: prompt)", reserved=True)
_field(
    PIXEL_VALUES,
    (torch.uint8, *_FLOAT),
    ("B", "S", "C", "H", "W"),
    "step",
    "camera frame the policy saw at each step (uint8 raw, or normalised float); a step is one action chunk",
)
_field(
    ACTION_TOKENS,
    _ID,
    ("B", "S", "A"),
    "step",
    "action tokens the policy emitted at each step: bin indices in [0, action_bins) of its chunk (A = K * D); "
    "flattened to S*A they are the token axis of response_mask, old_log_probs and advantages",
)
_field(
    INSTRUCTION_IDS,
    _INDEX,
    ("B", "L"),
    "instruction",
    "token ids of an embodied sample's language instruction, right-padded (the VLA's text input)",
)
_field(INSTRUCTION_MASK, _MASK, ("B", "L"), "instruction", "1 on the real tokens of instruction_ids, 0 on padding")
_field(
    FINISH_STEP,
    _ID,
    _SEQUENCE,
    "sequence",
    "env steps executed when the episode finished; action token j of the flattened (S*A) sequence is valid iff "
    "j < finish_step * D (D numbers per env step)",
)

SAMPLE_FIELDS: Mapping[str, FieldSpec] = MappingProxyType(_FIELDS)
"""Every sample field by name, in declaration order: today's fields first, then the reserved ones."""


def check_sample(tensors: Mapping[str, object], *, allow_unknown: bool = False) -> dict[str, int]:
    """Check tensors keyed by field name against `SAMPLE_FIELDS`; return the sizes bound to each symbol.

    Every tensor must have its field's rank and one of its dtypes, and the symbols must agree across
    fields (one `B`, one `T`, ...). A name outside the schema raises `UnknownNameError` unless
    `allow_unknown`, which skips such names. Raises `ShapeError` naming the field otherwise.
    """
    dims: dict[str, int] = {}
    for name, value in tensors.items():
        spec = SAMPLE_FIELDS.get(name)
        if spec is None:
            if allow_unknown:
                continue
            near = nearest_name(name, SAMPLE_FIELDS)
            hint = f"did you mean {near!r}? " if near else ""
            raise UnknownNameError(
                f"sample field {name!r} is not in rl_core.schema; {hint}known fields: {', '.join(SAMPLE_FIELDS)}; "
                "add it to rl_core/schema.py or pass allow_unknown=True"
            )
        if isinstance(value, torch.Tensor) and value.dtype not in spec.dtypes:
            allowed = ", ".join(str(d) for d in spec.dtypes)
            raise ShapeError(
                f"sample field {name!r} must have dtype {allowed}, got {value.dtype}; "
                f"cast it with .to({spec.dtypes[0]})"
            )
        check_tensor(name, value, spec.shape, dims=dims)
    return dims
