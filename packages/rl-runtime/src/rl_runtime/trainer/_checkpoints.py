"""The run's checkpoint folders: atomic commits, the newest complete one, keeping the last K.

    <output_dir>/checkpoints/step_00000004/      a complete checkpoint (it has trainer_state.json)
    <output_dir>/checkpoints/step_00000006.partial/   being written; never resumed from

A checkpoint is written into a `.partial` folder by every worker, then the driver writes `trainer_state.json` and
`manifest.json` (every file's size and CRC-32) and renames the folder, so a crash at any point leaves the previous
checkpoint the newest complete one. A resume verifies the manifest first (`verify_checkpoint`); `resume: auto`
takes the newest checkpoint that verifies (`newest_verified_checkpoint`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

from rl_runtime.trainer._errors import CheckpointStateError
from rl_runtime.trainer._manifest import MANIFEST_FILE, verify_manifest, write_manifest

logger = logging.getLogger(__name__)

CHECKPOINTS_DIR = "checkpoints"
STATE_FILE = "trainer_state.json"
PARTIAL_SUFFIX = ".partial"
MANIFEST_KEY = "manifest"
"""The state key naming the checkpoint's manifest; checkpoints written before manifests lack it."""
COLOCATE_KEY = "colocate"
"""The state key that says whether the run was colocated; a split run's ranks hold other engines and shards."""
_STEP_DIGITS = 8
_STEP_DIR = re.compile(r"^step_(\d+)$")


def checkpoint_root(run_dir: Path) -> Path:
    """Where a run's checkpoints live."""
    return Path(run_dir) / CHECKPOINTS_DIR


def partial_folder(root: Path, step: int) -> Path:
    """Where the checkpoint after `step` steps is written before it is committed."""
    return root / f"step_{step:0{_STEP_DIGITS}d}{PARTIAL_SUFFIX}"


def committed_folder(partial: Path) -> Path:
    """The name `commit_checkpoint` gives the `.partial` folder `partial`."""
    return partial.with_name(partial.name.removesuffix(PARTIAL_SUFFIX))


def begin_checkpoint(root: Path, step: int) -> Path:
    """A fresh, empty `.partial` folder for the checkpoint after `step` steps (a stale one is removed)."""
    partial = partial_folder(root, step)
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    return partial


def commit_checkpoint(partial: Path, state: dict[str, Any]) -> Path:
    """Write `state` and the manifest of every file into `partial` and rename it to its final name; returns the
    committed folder."""
    state_path = partial / STATE_FILE
    temporary = state_path.with_suffix(".tmp")
    temporary.write_text(json.dumps({**state, MANIFEST_KEY: MANIFEST_FILE}, indent=2, sort_keys=True))
    os.replace(temporary, state_path)
    start = time.perf_counter()
    manifest = write_manifest(partial)
    logger.debug("wrote %s in %.4f s", manifest, time.perf_counter() - start)
    final = committed_folder(partial)
    if final.exists():
        shutil.rmtree(final)
    os.replace(partial, final)
    return final


def complete_checkpoints(root: Path) -> list[tuple[int, Path]]:
    """Every committed checkpoint under `root` as (step, folder), oldest first."""
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = _STEP_DIR.match(child.name)
        if match and (child / STATE_FILE).is_file():
            found.append((int(match.group(1)), child))
    return sorted(found)


def latest_checkpoint(root: Path) -> Path | None:
    """The newest committed checkpoint under `root`, or None."""
    found = complete_checkpoints(root)
    return found[-1][1] if found else None


def prune_checkpoints(root: Path, keep_last: int | None) -> list[Path]:
    """Delete all but the newest `keep_last` committed checkpoints (None keeps all); returns the deleted folders."""
    if keep_last is None:
        return []
    doomed = [path for _, path in complete_checkpoints(root)[:-keep_last]]
    for path in doomed:
        shutil.rmtree(path)
    return doomed


def read_state(folder: Path) -> dict[str, Any]:
    """The trainer state of checkpoint `folder`; CheckpointStateError when it is not a complete checkpoint."""
    path = Path(folder) / STATE_FILE
    if not path.is_file():
        raise CheckpointStateError(
            f"{folder} is not a complete checkpoint (no {STATE_FILE}); resume from a folder under "
            f"<output_dir>/{CHECKPOINTS_DIR}/ named step_N, or set trainer.resume=never"
        )
    try:
        state = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise CheckpointStateError(f"{path} is not valid JSON ({error}); the checkpoint is damaged") from None
    if not isinstance(state, dict) or not isinstance(state.get("step"), int):
        raise CheckpointStateError(f"{path} has no integer 'step'; the checkpoint is damaged")
    return state


def verify_checkpoint(folder: Path) -> dict[str, Any]:
    """The trainer state of checkpoint `folder` once every file its manifest lists is present and unchanged;
    CheckpointStateError naming the file and what is wrong with it otherwise. A checkpoint written before
    manifests is read unverified, with a warning."""
    state = read_state(folder)
    if MANIFEST_KEY not in state and not (Path(folder) / MANIFEST_FILE).is_file():
        logger.warning(
            "checkpoint %s has no %s (written before manifests); resuming from it unverified", folder, MANIFEST_FILE
        )
        return state
    verify_manifest(Path(folder))
    return state


def newest_verified_checkpoint(root: Path) -> Path | None:
    """The newest committed checkpoint under `root` that verifies, warning about each newer one that does not;
    None when there is none at all; CheckpointStateError listing every failure when none verifies."""
    failures = []
    # Every step_N folder, with trainer_state.json or not: a committed folder lacks it only when it was damaged.
    named = [] if not root.is_dir() else [c for c in root.iterdir() if _STEP_DIR.match(c.name) and c.is_dir()]
    for folder in sorted(named, key=lambda c: int(c.name.removeprefix("step_")), reverse=True):
        try:
            verify_checkpoint(folder)
        except CheckpointStateError as error:
            logger.warning("skipping checkpoint %s: %s", folder.name, error)
            failures.append(f"{folder.name}: {error}")
            continue
        if failures:
            logger.warning("resuming from %s, the newest checkpoint that verifies", folder)
        return folder
    if failures:
        raise CheckpointStateError(
            f"no checkpoint under {root} verifies:\n  " + "\n  ".join(failures) + "\nrestore the damaged files, "
            "point trainer.resume at a good copy, or set trainer.resume=never to start over"
        )
    return None
