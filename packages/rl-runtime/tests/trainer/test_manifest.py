"""Checkpoint manifests: every file's size and CRC-32 recorded at commit; a flipped byte, a truncation or a
missing file is named, and `resume: auto` falls back to the newest checkpoint that verifies."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from rl_runtime.trainer import CheckpointStateError
from rl_runtime.trainer._checkpoints import (
    STATE_FILE,
    begin_checkpoint,
    checkpoint_root,
    commit_checkpoint,
    newest_verified_checkpoint,
    verify_checkpoint,
)
from rl_runtime.trainer._manifest import MANIFEST_FILE, CheckpointCorruptError, verify_manifest

FILES = ("rank_0.pt", "actor/__0_0.distcp", "actor/.metadata", "actor/engine.json")


def _save(root: Path, step: int) -> Path:
    partial = begin_checkpoint(root, step)
    for name in FILES:
        (partial / name).parent.mkdir(parents=True, exist_ok=True)
        (partial / name).write_bytes(bytes(range(256)) * 4 + name.encode())
    return commit_checkpoint(partial, {"step": step})


def _flip(path: Path, offset: int = 100) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_the_manifest_lists_every_file_and_a_fresh_checkpoint_verifies(tmp_path: Path) -> None:
    folder = _save(checkpoint_root(tmp_path), 2)
    listed = json.loads((folder / MANIFEST_FILE).read_text())["files"]
    assert sorted(listed) == sorted([*FILES, STATE_FILE])
    assert verify_manifest(folder) == sum((folder / name).stat().st_size for name in listed)
    assert verify_checkpoint(folder)["step"] == 2


@pytest.mark.parametrize("name", [*FILES, STATE_FILE])
def test_a_flipped_byte_in_any_file_is_named(tmp_path: Path, name: str) -> None:
    folder = _save(checkpoint_root(tmp_path), 2)
    _flip(folder / name, offset=5)  # early enough to stay inside trainer_state.json's text too
    with pytest.raises(CheckpointCorruptError, match=rf"{name}.* has CRC-32 [0-9a-f]{{8}}, the manifest recorded"):
        verify_checkpoint(folder)


def test_a_truncated_file_is_named_with_its_sizes(tmp_path: Path) -> None:
    folder = _save(checkpoint_root(tmp_path), 2)
    (folder / "actor/__0_0.distcp").write_bytes(b"short")
    with pytest.raises(CheckpointCorruptError, match=r"__0_0.distcp has 5 bytes, the manifest recorded 1042"):
        verify_checkpoint(folder)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    folder = _save(checkpoint_root(tmp_path), 2)
    (folder / "rank_0.pt").unlink()
    with pytest.raises(CheckpointCorruptError, match=r"rank_0.pt is missing \(the manifest lists it\)"):
        verify_checkpoint(folder)


def test_a_damaged_or_missing_manifest_is_named(tmp_path: Path) -> None:
    folder = _save(checkpoint_root(tmp_path), 2)
    text = (folder / MANIFEST_FILE).read_text()
    (folder / MANIFEST_FILE).write_text(text.replace('"size": 1033', '"size": 1034', 1))
    with pytest.raises(CheckpointCorruptError, match=r"manifest.json does not match its own checksum"):
        verify_checkpoint(folder)
    (folder / MANIFEST_FILE).unlink()
    with pytest.raises(CheckpointCorruptError, match=r"manifest.json is missing"):
        verify_checkpoint(folder)


def test_auto_resume_falls_back_to_the_newest_checkpoint_that_verifies(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = checkpoint_root(tmp_path)
    for step in (1, 2, 3):
        _save(root, step)
    _flip(root / "step_00000003" / "actor/__0_0.distcp")
    (root / "step_00000002" / STATE_FILE).unlink()
    with caplog.at_level(logging.WARNING):
        assert newest_verified_checkpoint(root) == root / "step_00000001"
    assert "skipping checkpoint step_00000003" in caplog.text and "__0_0.distcp has CRC-32" in caplog.text
    assert "skipping checkpoint step_00000002" in caplog.text and "not a complete checkpoint" in caplog.text
    _flip(root / "step_00000001" / "rank_0.pt")
    with pytest.raises(CheckpointStateError, match=r"no checkpoint under .* verifies:\n  step_00000003: .*\n  "):
        newest_verified_checkpoint(root)
    assert newest_verified_checkpoint(tmp_path / "nothing") is None


def test_a_checkpoint_from_before_manifests_loads_unverified_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "step_00000002"
    folder.mkdir()
    (folder / STATE_FILE).write_text(json.dumps({"step": 2}))
    with caplog.at_level(logging.WARNING):
        assert verify_checkpoint(folder) == {"step": 2}
    assert "written before manifests" in caplog.text
