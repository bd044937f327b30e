"""DCP checkpoints: exact resume over 2 processes, atomic saves, and the refusals of mismatched checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
from _training_helpers import engine_config, ppo_loss_fn, qwen_config, rollout_batch, run_distributed
from _training_workers import MICRO_BATCHES, resume_scenario

from rl_engines.training import (
    CheckpointError,
    CheckpointMismatchError,
    ForwardSpec,
    FSDPEngine,
    ModelConfig,
    OptimizerConfig,
)
from rl_engines.training._atomic import staging_path

DROPOUT = 0.1
"""Attention dropout makes every step consume random numbers, so a resume is exact only if the RNG is restored."""


def _dropout_config() -> object:
    config = qwen_config()
    config.attention_dropout = DROPOUT
    return config


def _train(engine: FSDPEngine, seed: int) -> float:
    batch = rollout_batch(4, seed=seed)
    normalizer = engine.global_normalizer(batch["response_mask"])
    return engine.train_step(batch, MICRO_BATCHES, normalizer, ppo_loss_fn, ForwardSpec()).loss


def _weights(engine: FSDPEngine) -> dict[str, torch.Tensor]:
    return {name: t.clone() for bucket in engine.export_weights(1 << 20) for name, t in bucket}


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    out = tmp_path_factory.mktemp("resume")
    run_distributed(resume_scenario, out, _dropout_config())
    return out, [torch.load(out / f"resume_rank{rank}.pt", weights_only=False) for rank in range(2)]


@pytest.mark.slow
def test_save_load_continue_is_bit_identical_over_three_steps(resumed: tuple[Path, list[dict]]) -> None:
    _, ranks = resumed
    for rank in ranks:
        assert rank["loaded_step"] == 1
        assert rank["identical"]
        assert rank["straight_losses"] == rank["resumed_losses"]
        assert rank["lr"] > 0


@pytest.mark.slow
def test_checkpoint_of_two_ranks_is_refused_by_one(resumed: tuple[Path, list[dict]]) -> None:
    out, _ = resumed
    engine = FSDPEngine.from_config(engine_config(_dropout_config()))
    with pytest.raises(CheckpointMismatchError, match="world_size=2 but this engine runs world_size=1"):
        engine.load_checkpoint(out / "ckpt")


def test_one_process_resume_restores_weights_optimizer_and_step(tmp_path: Path) -> None:
    config = engine_config(_dropout_config())
    torch.manual_seed(0)
    straight = FSDPEngine.from_config(config)
    losses = [_train(straight, seed) for seed in (1, 2)]
    torch.manual_seed(0)
    first = FSDPEngine.from_config(config)
    resumed = [_train(first, 1)]
    first.save_checkpoint(tmp_path / "ckpt")
    torch.manual_seed(99)
    second = FSDPEngine.from_config(config)
    assert second.load_checkpoint(tmp_path / "ckpt") == 1
    resumed.append(_train(second, 2))
    assert resumed == losses
    final, expected = _weights(second), _weights(straight)
    assert all(torch.equal(final[name], expected[name]) for name in expected)


def test_crash_mid_save_leaves_the_previous_checkpoint_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = FSDPEngine.from_config(engine_config())
    _train(engine, 1)
    path = tmp_path / "ckpt"
    engine.save_checkpoint(path)
    saved = _weights(engine)
    _train(engine, 2)

    real_save = dcp.save

    def crash_after_writing(state: dict, **kwargs: object) -> None:
        real_save(state, **kwargs)
        raise OSError("disk full")

    monkeypatch.setattr(dcp, "save", crash_after_writing)
    with pytest.raises(OSError, match="disk full"):
        engine.save_checkpoint(path)
    monkeypatch.undo()
    assert staging_path(path).exists()  # the half-written save is left aside, never at `path`
    fresh = FSDPEngine.from_config(engine_config())
    assert fresh.load_checkpoint(path) == 1
    assert all(torch.equal(t, saved[name]) for name, t in _weights(fresh).items())
    engine.save_checkpoint(path)  # the next save clears the leftovers and replaces the old checkpoint
    assert not staging_path(path).exists()
    assert FSDPEngine.from_config(engine_config()).load_checkpoint(path) == 2


def test_checkpoint_of_another_model_is_refused_naming_the_field(tmp_path: Path) -> None:
    FSDPEngine.from_config(engine_config()).save_checkpoint(tmp_path / "ckpt")
    wider = qwen_config()
    wider.intermediate_size = 96
    other = FSDPEngine.from_config(engine_config(wider))
    with pytest.raises(CheckpointMismatchError, match=r"intermediate_size=64 but this engine's model has .*=96"):
        other.load_checkpoint(tmp_path / "ckpt")


def test_checkpoint_without_optimizer_is_refused_by_a_trainable_engine(tmp_path: Path) -> None:
    frozen = FSDPEngine.from_config(engine_config(optimizer=None))
    frozen.save_checkpoint(tmp_path / "ckpt")
    with pytest.raises(CheckpointMismatchError, match="has no optimizer state but the engine has optimizer"):
        FSDPEngine.from_config(engine_config(optimizer=OptimizerConfig())).load_checkpoint(tmp_path / "ckpt")


def test_folder_that_is_no_checkpoint_is_refused(tmp_path: Path) -> None:
    engine = FSDPEngine.from_config(engine_config(model=ModelConfig(hf_config=qwen_config())))
    with pytest.raises(CheckpointError, match="not a checkpoint written by save_checkpoint"):
        engine.load_checkpoint(tmp_path)
