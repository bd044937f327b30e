"""The sample schema: the wire names are pinned, every constant has a spec, and check_sample catches bad batches."""

from __future__ import annotations

import pytest
import torch

from rl_core import ShapeError, UnknownNameError, schema
from rl_core.schema import SAMPLE_FIELDS, check_sample

# The names other processes, checkpoints and recipes see: renaming one is a reviewed, breaking change.
WIRE_NAMES = {
    "input_ids": ("token", False),
    "attention_mask": ("token", False),
    "position_ids": ("token", False),
    "response_mask": ("token", False),
    "prompt_len": ("sequence", False),
    "response_len": ("sequence", False),
    "old_log_probs": ("token", False),
    "ref_log_probs": ("token", False),
    "rollout_log_probs": ("token", False),
    "values": ("token", False),
    "token_level_scores": ("token", False),
    "token_level_rewards": ("token", False),
    "advantages": ("token", False),
    "returns": ("token", False),
    "uid": ("sequence", False),
    "group_id": ("sequence", False),
    "policy_version": ("sequence", False),
    "baseline_rewards": ("sequence", False),
    "inert_rows": ("sequence", False),
    "loss_mask": ("token", True),
    "token_policy_version": ("token", True),
    "turn_id": ("token", True),
    "pixel_values": ("step", False),
    "action_tokens": ("step", False),
    "instruction_ids": ("instruction", False),
    "instruction_mask": ("instruction", False),
    "finish_step": ("sequence", False),
}


def _constants() -> dict[str, str]:
    return {name: getattr(schema, name) for name in schema.__all__ if isinstance(getattr(schema, name), str)}


def test_wire_names_levels_and_reserved_flags_are_pinned() -> None:
    assert {name: (spec.level, spec.reserved) for name, spec in SAMPLE_FIELDS.items()} == WIRE_NAMES


def test_every_constant_is_a_field_and_every_field_a_constant() -> None:
    constants = _constants()
    assert sorted(constants.values()) == sorted(SAMPLE_FIELDS)
    for constant, name in constants.items():
        assert constant == name.upper()
    # tools/check_sample_fields.py reads the names as schema.py's module-level UPPER_CASE string constants.
    upper_strings = {value for key, value in vars(schema).items() if key.isupper() and isinstance(value, str)}
    assert upper_strings == set(SAMPLE_FIELDS)


def test_specs_are_consistent_with_their_level() -> None:
    for name, spec in SAMPLE_FIELDS.items():
        assert spec.name == name
        assert spec.shape[0] == "B" and spec.dtypes and spec.doc
        if spec.level == "token":
            assert spec.shape == ("B", "T"), name
        elif spec.level == "sequence":
            assert spec.shape == ("B",), name
        elif spec.level == "instruction":
            assert spec.shape == ("B", "L"), name
        else:
            assert spec.shape[:2] == ("B", "S"), name


def test_an_embodied_batch_checks_its_instruction_apart_from_its_action_tokens() -> None:
    # The instruction has its own width L; the token-level fields cover the S*A action tokens.
    batch = {
        schema.INSTRUCTION_IDS: torch.zeros(2, 7, dtype=torch.int64),
        schema.INSTRUCTION_MASK: torch.ones(2, 7, dtype=torch.int64),
        schema.PIXEL_VALUES: torch.zeros(2, 3, 3, 8, 8, dtype=torch.uint8),
        schema.ACTION_TOKENS: torch.zeros(2, 3, 4, dtype=torch.int64),
        schema.RESPONSE_MASK: torch.ones(2, 12, dtype=torch.bool),
        schema.FINISH_STEP: torch.tensor([3, 1]),
    }
    assert check_sample(batch) == {"B": 2, "L": 7, "S": 3, "C": 3, "H": 8, "W": 8, "A": 4, "T": 12}
    with pytest.raises(ShapeError, match="instruction_mask"):
        check_sample({**batch, schema.INSTRUCTION_MASK: torch.ones(2, 6, dtype=torch.int64)})


def _rollout_batch(b: int = 3, t: int = 5) -> dict[str, torch.Tensor]:
    return {
        schema.INPUT_IDS: torch.zeros(b, t, dtype=torch.int64),
        schema.ATTENTION_MASK: torch.ones(b, t, dtype=torch.int64),
        schema.RESPONSE_MASK: torch.ones(b, t, dtype=torch.bool),
        schema.ROLLOUT_LOG_PROBS: torch.zeros(b, t),
        schema.PROMPT_LEN: torch.full((b,), 2),
        schema.RESPONSE_LEN: torch.full((b,), 3),
        schema.UID: torch.arange(b),
        schema.GROUP_ID: torch.zeros(b, dtype=torch.int64),
        schema.POLICY_VERSION: torch.zeros(b, dtype=torch.int64),
    }


def test_check_sample_accepts_a_rollout_batch_and_returns_its_sizes() -> None:
    assert check_sample(_rollout_batch(3, 5)) == {"B": 3, "T": 5}


def test_check_sample_binds_the_step_symbols_of_reserved_fields() -> None:
    batch = {
        schema.PIXEL_VALUES: torch.zeros(2, 4, 3, 8, 8, dtype=torch.uint8),
        schema.ACTION_TOKENS: torch.zeros(2, 4, 7, dtype=torch.int64),
        schema.FINISH_STEP: torch.tensor([3, 1]),
    }
    assert check_sample(batch) == {"B": 2, "S": 4, "C": 3, "H": 8, "W": 8, "A": 7}
    batch[schema.ACTION_TOKENS] = torch.zeros(2, 5, 7, dtype=torch.int64)
    with pytest.raises(ShapeError, match="action_tokens must have shape"):
        check_sample(batch)


def test_check_sample_refuses_disagreeing_batch_sizes() -> None:
    batch = _rollout_batch()
    batch[schema.UID] = torch.arange(4)
    with pytest.raises(ShapeError, match=r"uid must have shape \(B\) with B=3"):
        check_sample(batch)


def test_check_sample_refuses_disagreeing_lengths() -> None:
    batch = _rollout_batch()
    batch[schema.RESPONSE_MASK] = torch.ones(3, 6, dtype=torch.bool)
    with pytest.raises(ShapeError, match="response_mask must have shape"):
        check_sample(batch)


def test_check_sample_refuses_a_wrong_rank() -> None:
    batch = _rollout_batch()
    batch[schema.POLICY_VERSION] = torch.zeros(3, 1, dtype=torch.int64)
    with pytest.raises(ShapeError, match=r"policy_version must have shape \(B\)"):
        check_sample(batch)


def test_check_sample_refuses_a_wrong_dtype_and_names_the_fix() -> None:
    batch = _rollout_batch()
    batch[schema.POLICY_VERSION] = torch.zeros(3, dtype=torch.float32)
    with pytest.raises(ShapeError, match=r"'policy_version' must have dtype torch.int64, got torch.float32.*\.to"):
        check_sample(batch)


def test_check_sample_refuses_a_non_tensor() -> None:
    with pytest.raises(ShapeError, match=r"uid must be a torch\.Tensor"):
        check_sample({schema.UID: [1, 2]})


def test_check_sample_refuses_unknown_names_with_the_nearest_one() -> None:
    with pytest.raises(
        UnknownNameError, match=r"'old_logprobs' is not in rl_core\.schema; did you mean 'old_log_probs'"
    ):
        check_sample({"old_logprobs": torch.zeros(2, 3)})
    assert check_sample({"old_logprobs": torch.zeros(2, 3)}, allow_unknown=True) == {}
