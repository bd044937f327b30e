"""The run's checkpoint folders: atomic commits, the newest complete one, keeping the last K.

    <output_dir>/checkpoints/step_00000004/      a complete checkpoint (it has trainer_state.json)
    <output_dir>/checkpoints/step_00000006.partial/   being written; never resumed from

A checkpoint is written into a `.partial` folder by every worker, then the driver writes `trainer_state.json`
and renames the folder, so a crash at any point leaves the previous checkpoint the newest complete one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from rl_runtime.trainer._errors import CheckpointStateError

CHECKPOINTS_DIR = "checkpoints"
STATE_FILE = "trainer_state.json"
PARTIAL_SUFFIX = ".partial"
COLOCATE_KEY = "colocate"
"""The state key that says whether the run was colocated; a split run's ranks hold other engines and shards."""
_STEP_DIGITS = 8
_STEP_DIR = re.compile(r"^step_(\d+)$")


def checkpoint_root(run_dir: Path) -> Path:
    """Where a run's checkpoints live."""
    return Path(run_dir) / CHECKPOINTS_DIR


def begin_checkpoint(root: Path, step: int) -> Path:
    """A fresh, empty `.partial` folder for the checkpoint after `step` steps (a stale one is removed)."""
    partial = root / f"step_{step:0{_STEP_DIGITS}d}{PARTIAL_SUFFIX}"
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    return partial


def commit_checkpoint(partial: Path, state: dict[str, Any]) -> Path:
    """Write `state` into `partial` and rename it to its final name; returns the committed folder."""
    state_path = partial / STATE_FILE
    temporary = state_path.with_suffix(".tmp")
    temporary.write_text(json.dumps(state, indent=2, sort_keys=True))
    os.replace(temporary, state_path)
    final = partial.with_name(partial.name.removesuffix(PARTIAL_SUFFIX))
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
