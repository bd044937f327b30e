"""`trainer.launcher` and torchrun's environment: which launch a config gets, and every mismatch refused with both
sides named before anything starts (on every rank, since each reads only its own environment)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_runtime.config import ConfigError
from rl_runtime.trainer import Launch, TrainerError, launch_from_env, resolve_launch
from rl_runtime.trainer._lock import LOCK_FILE, acquire_run_lock, release_run_lock

from ._task import tiny_config

TORCHRUN = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"}


@pytest.fixture
def torchrun_rank_1(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in TORCHRUN.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def no_torchrun(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in TORCHRUN:
        monkeypatch.delenv(name, raising=False)


def test_torchrun_variables_make_an_spmd_launch(tmp_path: Path, torchrun_rank_1: None) -> None:
    assert launch_from_env() == Launch(True, rank=1, world_size=2, local_rank=1)
    launch = resolve_launch(tiny_config(tmp_path))
    assert launch.spmd and not launch.is_leader


def test_without_them_auto_is_ray_and_torchrun_is_refused(tmp_path: Path, no_torchrun: None) -> None:
    assert resolve_launch(tiny_config(tmp_path)) == Launch(spmd=False)
    with pytest.raises(TrainerError, match=r"trainer.launcher: expected torchrun's environment variables .*RANK"):
        resolve_launch(tiny_config(tmp_path, launcher="torchrun"))


def test_a_world_size_other_than_the_slots_is_refused_naming_both(tmp_path: Path, torchrun_rank_1: None) -> None:
    config = tiny_config(tmp_path, placement={"slots": 4})
    with pytest.raises(TrainerError, match=r"placement.slots: expected torchrun's WORLD_SIZE=2 .*found 4"):
        resolve_launch(config)


def test_split_placement_and_the_ray_launcher_are_refused_under_torchrun(tmp_path: Path, torchrun_rank_1: None) -> None:
    with pytest.raises(ConfigError, match=r"placement.colocate: expected true: a torchrun launch .*Ray-only"):
        resolve_launch(tiny_config(tmp_path, placement={"colocate": False}))
    with pytest.raises(TrainerError, match=r"trainer.launcher: expected torchrun or auto .*found 'ray'"):
        resolve_launch(tiny_config(tmp_path, launcher="ray"))


def test_a_config_asking_for_torchrun_refuses_split_placement_at_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"placement.colocate"):
        tiny_config(tmp_path, launcher="torchrun", placement={"colocate": False})


def test_only_rank_0_takes_the_run_folder_lock(tmp_path: Path, torchrun_rank_1: None) -> None:
    acquire_run_lock(tmp_path)
    release_run_lock(tmp_path)
    assert not (tmp_path / LOCK_FILE).exists()
