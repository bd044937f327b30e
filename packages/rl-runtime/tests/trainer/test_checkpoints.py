"""Checkpoint folders: atomic commit, newest complete one, keep-last-K, damaged state named."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_runtime.trainer import CheckpointStateError, read_state
from rl_runtime.trainer._checkpoints import (
    MANIFEST_KEY,
    begin_checkpoint,
    checkpoint_root,
    commit_checkpoint,
    complete_checkpoints,
    latest_checkpoint,
    prune_checkpoints,
)
from rl_runtime.trainer._manifest import MANIFEST_FILE


def _save(root: Path, step: int) -> Path:
    partial = begin_checkpoint(root, step)
    (partial / "rank_0.pt").write_bytes(b"x")
    return commit_checkpoint(partial, {"step": step})


def test_only_committed_checkpoints_count(tmp_path: Path) -> None:
    root = checkpoint_root(tmp_path)
    _save(root, 2)
    begin_checkpoint(root, 4)  # a crash mid-save leaves a .partial folder
    assert [step for step, _ in complete_checkpoints(root)] == [2]
    assert latest_checkpoint(root).name == "step_00000002"
    assert read_state(latest_checkpoint(root)) == {"step": 2, MANIFEST_KEY: MANIFEST_FILE}


def test_keep_last_prunes_the_oldest(tmp_path: Path) -> None:
    root = checkpoint_root(tmp_path)
    for step in (1, 2, 3):
        _save(root, step)
    removed = prune_checkpoints(root, keep_last=2)
    assert [path.name for path in removed] == ["step_00000001"]
    assert [step for step, _ in complete_checkpoints(root)] == [2, 3]
    assert prune_checkpoints(root, keep_last=None) == []


def test_resaving_a_step_replaces_it_whole(tmp_path: Path) -> None:
    root = checkpoint_root(tmp_path)
    _save(root, 2)
    folder = _save(root, 2)
    assert read_state(folder) == {"step": 2, MANIFEST_KEY: MANIFEST_FILE} and len(complete_checkpoints(root)) == 1


def test_an_incomplete_or_damaged_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(CheckpointStateError, match="not a complete checkpoint"):
        read_state(tmp_path)
    (tmp_path / "trainer_state.json").write_text("{not json")
    with pytest.raises(CheckpointStateError, match="damaged"):
        read_state(tmp_path)
    assert latest_checkpoint(tmp_path / "missing") is None
