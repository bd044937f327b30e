"""Trajectory and Completion: validated lengths and values, immutable once built; the builder's masks."""

from __future__ import annotations

import dataclasses

import pytest

from rl_core.workflows import NO_VERSION, Completion, Trajectory, TrajectoryBuilder, TrajectoryError


def _two_turns() -> Trajectory:
    builder = TrajectoryBuilder([1, 2, 3])
    builder.add_completion(Completion((10, 11), (-0.5, -0.25), (4, 4)))
    builder.add_observation([7, 8, 9])
    builder.add_completion(Completion((12,), (-1.0,), (5,), "length"))
    return builder.build(reward=1.0, truncated=True, metadata={"calls": ["calculator"]})


def test_builder_masks_model_tokens_only_and_numbers_turns() -> None:
    trajectory = _two_turns()
    assert trajectory.token_ids == (1, 2, 3, 10, 11, 7, 8, 9, 12)
    assert trajectory.loss_mask == (0, 0, 0, 1, 1, 0, 0, 0, 1)
    assert trajectory.log_probs == (0.0, 0.0, 0.0, -0.5, -0.25, 0.0, 0.0, 0.0, -1.0)
    assert trajectory.versions == (NO_VERSION,) * 3 + (4, 4) + (NO_VERSION,) * 3 + (5,)
    assert trajectory.turn_ids == (0, 0, 0, 1, 1, 1, 1, 1, 2)
    assert trajectory.turn_starts == (0, 3, 8)
    assert (trajectory.prompt_len, trajectory.response_len, trajectory.num_turns) == (3, 6, 2)
    assert trajectory.finish_reason == "length" and trajectory.truncated and trajectory.reward == 1.0


def test_trajectory_is_immutable() -> None:
    trajectory = _two_turns()
    with pytest.raises(dataclasses.FrozenInstanceError):
        trajectory.reward = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        trajectory.metadata["calls"] = []  # type: ignore[index]
    with pytest.raises(TypeError):
        trajectory.loss_mask[3] = 0  # type: ignore[index]
    # The metadata is a copy: changing the caller's dict afterwards changes nothing.
    source = {"k": 1}
    builder = TrajectoryBuilder([1])
    builder.add_completion(Completion((2,), (-0.1,), (0,)))
    frozen = builder.build(metadata=source)
    source["k"] = 2
    assert frozen.metadata["k"] == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"loss_mask": (0, 1)}, "loss_mask has 2 entries"),
        ({"log_probs": (0.0,) * 4}, "log_probs has 4 entries"),
        ({"loss_mask": (0, 2, 0)}, "0 or 1"),
        ({"loss_mask": (1, 1, 0)}, "0 on the prompt"),
        ({"loss_mask": (0, 0, 0)}, "no model token"),
        ({"versions": (-1, -1, 0)}, "versions[1]"),
        ({"turn_ids": (0, 1, 0)}, "never decrease"),
        ({"prompt_len": 3}, "prompt_len"),
        ({"reward": float("nan")}, "reward"),
        ({"finish_reason": "done"}, "finish_reason"),
        ({"log_probs": (0.0, float("nan"), 0.0)}, "finite log-probs"),
    ],
)
def test_trajectory_refuses_inconsistent_fields(change: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {
        "token_ids": (1, 2, 3),
        "loss_mask": (0, 1, 0),
        "log_probs": (0.0, -0.1, 0.0),
        "versions": (-1, 0, -1),
        "turn_ids": (0, 1, 1),
        "prompt_len": 1,
    }
    with pytest.raises(TrajectoryError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Trajectory(**{**fields, **change})  # type: ignore[arg-type]


def test_completion_checks_lengths_and_versions() -> None:
    with pytest.raises(TrajectoryError, match="log_probs has 1 entries"):
        Completion((1, 2), (-0.1,), (0, 0))
    with pytest.raises(TrajectoryError, match="versions must be weight versions"):
        Completion((1,), (-0.1,), (-1,))
    with pytest.raises(TrajectoryError, match="must hold ints"):
        Completion((1.5,), (-0.1,), (0,))  # type: ignore[arg-type]
