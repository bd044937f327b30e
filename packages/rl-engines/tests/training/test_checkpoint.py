"""DCP checkpoints: exact resume over 2 processes, resharding between 1 and 2 processes, atomic saves, and the
refusals of checkpoints of another model."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
from _training_helpers import engine_config, ppo_loss_fn, qwen_config, rollout_batch, run_distributed
from _training_workers import (
    exported_weights,
    reshard_config,
    reshard_scenario,
    resume_scenario,
    steps_at,
)

from rl_engines.training import (
    CheckpointError,
    CheckpointMismatchError,
    ForwardSpec,
    FSDPEngine,
    ModelConfig,
    OptimizerConfig,
)
from rl_engines.training._atomic import staging_path
from rl_engines.training._checkpoint import ENGINE_FILE, rng_source_rank

DROPOUT = 0.1
RESHARD_TOLERANCE = 1e-6
"""Continuing at another world size sums the same gradients in another order (per-rank partial sums reduced
across ranks, against one process accumulating every micro-batch; likewise the clipping norm's squares), so
it agrees with continuing at the saved size to float32 rounding, not bit for bit."""
"""Attention dropout makes every step consume random numbers, so a resume is exact only if the RNG is restored."""


def _dropout_config() -> object:
    config = qwen_config()
    config.attention_dropout = DROPOUT
    return config


def _train(engine: FSDPEngine, seed: int) -> float:
    batch = rollout_batch(4, seed=seed)
    return engine.train_step(batch, ppo_loss_fn, ForwardSpec()).loss


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
    final, expected = exported_weights(second), exported_weights(straight)
    assert all(torch.equal(final[name], expected[name]) for name in expected)


def test_crash_mid_save_leaves_the_previous_checkpoint_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = FSDPEngine.from_config(engine_config())
    _train(engine, 1)
    path = tmp_path / "ckpt"
    engine.save_checkpoint(path)
    saved = exported_weights(engine)
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
    assert all(torch.equal(t, saved[name]) for name, t in exported_weights(fresh).items())
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


@pytest.mark.parametrize("damage", ["engine.json", "shard", "metadata"])
def test_a_damaged_checkpoint_file_is_named(tmp_path: Path, damage: str) -> None:
    engine = FSDPEngine.from_config(engine_config())
    engine.save_checkpoint(tmp_path / "ckpt")
    if damage == "engine.json":
        (tmp_path / "ckpt" / ENGINE_FILE).write_text('{"format_version": 1, "wor')
        expected = r"ckpt/engine.json is not valid JSON .*the checkpoint is damaged"
    else:
        pattern = "*.distcp" if damage == "shard" else ".metadata"
        target = next((tmp_path / "ckpt").glob(pattern))
        target.write_bytes(target.read_bytes()[:40])
        expected = r"ckpt: reading its shards \(\.distcp, \.metadata\) failed .*the checkpoint is damaged"
    with pytest.raises(CheckpointError, match=expected):
        FSDPEngine.from_config(engine_config()).load_checkpoint(tmp_path / "ckpt")


def test_folder_that_is_no_checkpoint_is_refused(tmp_path: Path) -> None:
    engine = FSDPEngine.from_config(engine_config(model=ModelConfig(hf_config=qwen_config())))
    with pytest.raises(CheckpointError, match="not a checkpoint written by save_checkpoint"):
        engine.load_checkpoint(tmp_path)


@pytest.fixture(scope="module")
def resharded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, list[dict]]:
    """A one-process run saved after step 1 and continued two steps; then the 2-rank scenario (which loads it)."""
    out = tmp_path_factory.mktemp("reshard")
    torch.manual_seed(300)
    engine = FSDPEngine.from_config(reshard_config())
    steps_at(engine, range(1, 2))
    one = {"saved_rng": torch.get_rng_state()}
    engine.save_checkpoint(out / "ckpt1")
    one["continued"] = steps_at(engine, range(2, 4))
    one["continued_weights"] = exported_weights(engine)
    run_distributed(reshard_scenario, out)
    return out, one, [torch.load(out / f"reshard_rank{rank}.pt", weights_only=False) for rank in range(2)]


def _assert_same_run(losses: list[float], weights: dict, expected_losses: list[float], expected: dict) -> None:
    assert losses == pytest.approx(expected_losses, abs=RESHARD_TOLERANCE)
    assert weights.keys() == expected.keys()
    for name, tensor in expected.items():
        torch.testing.assert_close(weights[name], tensor, atol=RESHARD_TOLERANCE, rtol=0, msg=name)


def test_two_rank_checkpoint_continues_in_one_process(
    resharded: tuple[Path, dict, list[dict]], caplog: pytest.LogCaptureFixture
) -> None:
    out, _, ranks = resharded
    torch.manual_seed(12345)
    engine = FSDPEngine.from_config(reshard_config())
    with caplog.at_level(logging.WARNING, logger="rl_engines.training._checkpoint"):
        assert engine.load_checkpoint(out / "ckpt2") == 1
    assert "written by 2 ranks and loads into 1" in caplog.text
    assert "rank 0 restores the RNG state of saved rank 0" in caplog.text
    assert torch.equal(torch.get_rng_state(), ranks[0]["saved_rng"])  # saved rank 1's stream is dropped
    losses = steps_at(engine, range(2, 4))
    _assert_same_run(losses, exported_weights(engine), ranks[0]["continued"], ranks[0]["continued_weights"])
    assert ranks[0]["continued"] == ranks[1]["continued"]


def test_one_process_checkpoint_continues_on_two_ranks(resharded: tuple[Path, dict, list[dict]]) -> None:
    _, one, ranks = resharded
    for rank in ranks:
        assert rank["grown_step"] == 1
        assert rank["grown_lr"] > 0
        assert torch.equal(rank["grown_rng"], one["saved_rng"])  # both ranks restore saved rank 0's stream
        _assert_same_run(rank["grown"], rank["grown_weights"], one["continued"], one["continued_weights"])


def test_rng_source_rank_wraps_around_the_saved_world() -> None:
    assert [rng_source_rank(rank, 2) for rank in range(4)] == [0, 1, 0, 1]
    assert [rng_source_rank(rank, 4) for rank in range(2)] == [0, 1]
    assert [rng_source_rank(rank, 1) for rank in range(3)] == [0, 0, 0]


def _value_head_config(value_head: bool) -> object:
    return engine_config(model=ModelConfig(hf_config=qwen_config(), value_head=value_head))


def test_checkpoint_without_the_engines_value_head_is_refused_naming_it(tmp_path: Path) -> None:
    FSDPEngine.from_config(_value_head_config(False)).save_checkpoint(tmp_path / "ckpt")
    critic = FSDPEngine.from_config(_value_head_config(True))
    with pytest.raises(
        CheckpointMismatchError, match=r"engine's model has parameter 'value_head.weight' that the checkpoint lacks"
    ):
        critic.load_checkpoint(tmp_path / "ckpt")


def test_checkpoint_with_a_value_head_the_engine_lacks_is_refused_naming_it(tmp_path: Path) -> None:
    FSDPEngine.from_config(_value_head_config(True)).save_checkpoint(tmp_path / "ckpt")
    actor = FSDPEngine.from_config(_value_head_config(False))
    with pytest.raises(
        CheckpointMismatchError,
        match=r"checkpoint has parameter 'value_head.weight' of shape \(1, 32\) that this engine's model lacks",
    ):
        actor.load_checkpoint(tmp_path / "ckpt")


def test_checkpoint_with_other_parameter_shapes_is_refused_naming_the_first(tmp_path: Path) -> None:
    FSDPEngine.from_config(engine_config()).save_checkpoint(tmp_path / "ckpt")
    wide_heads = qwen_config()
    wide_heads.head_dim = 16  # not an architecture field the fingerprint lists: only the shapes differ
    with pytest.raises(
        CheckpointMismatchError,
        match=r"parameter 'backbone.model.layers.0.self_attn.q_proj.weight' has shape \(32, 32\) but this "
        r"engine's has \(64, 32\)",
    ):
        FSDPEngine.from_config(engine_config(wide_heads)).load_checkpoint(tmp_path / "ckpt")


def test_checkpoint_without_stored_shapes_is_checked_by_its_digest(tmp_path: Path) -> None:
    FSDPEngine.from_config(_value_head_config(False)).save_checkpoint(tmp_path / "ckpt")
    meta_file = tmp_path / "ckpt" / ENGINE_FILE
    meta = json.loads(meta_file.read_text())
    del meta["parameter_shapes"]  # as written before the shapes were stored
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(CheckpointMismatchError, match=r"parameter names and shapes \(digest \w+\) differ"):
        FSDPEngine.from_config(_value_head_config(True)).load_checkpoint(tmp_path / "ckpt")
    assert FSDPEngine.from_config(_value_head_config(False)).load_checkpoint(tmp_path / "ckpt") == 0
