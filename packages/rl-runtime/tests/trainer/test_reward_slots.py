"""A reward model on a slot of its own (`reward_model.placement: slot`): the reward node's scores through the slot
equal the colocated scorer's on the same samples (token ids and re-tokenised text), and a dead slot fails the call
instead of hanging it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import ray
import torch

from rl_core.schema import INPUT_IDS, PROMPT_LEN, RESPONSE_LEN
from rl_engines.reward_model import (
    RewardModelConfig,
    RewardModelPlacement,
    RewardModelScorer,
    RewardScorer,
    TokenizerMode,
)
from rl_runtime.nodes._model_rewards import reward_model_scores
from rl_runtime.trainer._remote_reward_model import RemoteRewardModel
from rl_runtime.trainer._reward_slots import RewardSlots
from rl_runtime.workers import StepData

from ._reward_model import save_tiny_reward_model

pytestmark = pytest.mark.usefixtures("ray_runtime")
PIECES = "abcdefghijklmn"


class LetterTask:
    """Token id i + 2 is letter i (the reward model's own vocabulary)."""

    def decode(self, token_ids: Sequence[int]) -> str:
        return "".join(PIECES[token - 2] for token in token_ids)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_reward_model(tmp_path_factory.mktemp("rm"), PIECES)


@pytest.fixture(scope="module")
def slots(folder: Path) -> Iterator[RewardSlots]:
    config = RewardModelConfig(path=str(folder), placement=RewardModelPlacement.SLOT, batch_size=2)
    started = RewardSlots.start(config, "cpu", use_gpu=False)
    yield started
    started.close()


def _data() -> StepData:
    return StepData(
        batch={
            INPUT_IDS: torch.tensor([[2, 3, 4, 5, 0], [6, 7, 8, 9, 10], [11, 12, 13, 1, 0]]),
            PROMPT_LEN: torch.tensor([2, 1, 2]),
            RESPONSE_LEN: torch.tensor([2, 4, 2]),
        }
    )


@pytest.mark.parametrize("mode", [TokenizerMode.SAME, TokenizerMode.RETOKENIZE])
def test_scores_through_the_slot_equal_the_colocated_scorers(
    folder: Path, slots: RewardSlots, mode: TokenizerMode
) -> None:
    config = RewardModelConfig(path=str(folder), tokenizer=mode, placement=RewardModelPlacement.SLOT, batch_size=2)
    remote = slots.scorer_for(0, config, timeout_s=60.0)
    local = RewardModelScorer.from_config(dataclasses.replace(config, placement=RewardModelPlacement.COLOCATE))
    assert isinstance(remote, RewardScorer) and isinstance(local, RewardScorer)

    found, metrics = reward_model_scores(remote, LetterTask(), _data())
    expected, expected_metrics = reward_model_scores(local, LetterTask(), _data())

    assert found.shape == (3,) and found.dtype == torch.float32
    torch.testing.assert_close(found, expected, rtol=0.0, atol=1e-6)
    assert metrics.keys() == expected_metrics.keys()
    assert metrics["reward/model_truncated_frac"] == expected_metrics["reward/model_truncated_frac"] == 0.0


def test_a_dead_slot_fails_the_call_instead_of_hanging(folder: Path) -> None:
    config = RewardModelConfig(path=str(folder), placement=RewardModelPlacement.SLOT)
    handle = ray.remote(_Dead).remote()
    with pytest.raises((ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError)):
        RemoteRewardModel(handle, config, timeout_s=30.0).score_ids([[2, 3]])
    ray.kill(handle)


class _Dead:
    """An actor that exits in the middle of a scoring call."""

    def score_ids(self, sequences: Sequence[Sequence[int]]) -> None:
        import os

        os._exit(1)
