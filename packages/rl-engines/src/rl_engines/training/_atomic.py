"""Publishing a folder atomically: it is written under a temporary name and renamed into place when complete.

A crash mid-write leaves only the temporary folder behind; whatever stood at the final path before stays
intact until the finished folder replaces it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

INCOMPLETE_SUFFIX = ".incomplete"
REPLACED_SUFFIX = ".replaced"


def staging_path(final: Path) -> Path:
    """The temporary folder beside `final` that is written first (the same name on every rank)."""
    return final.parent / f".{final.name}{INCOMPLETE_SUFFIX}"


def prepare_staging(final: Path) -> Path:
    """Create an empty staging folder for `final`, clearing the leftovers of an earlier crashed write."""
    staging = staging_path(final)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    return staging


def _fsync_dir(path: Path) -> None:
    """Flush a folder's entry table so a rename inside it survives a power loss (no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def publish(final: Path) -> None:
    """Move the finished staging folder to `final`, replacing a folder already there."""
    staging = staging_path(final)
    _fsync_dir(staging)
    replaced = final.parent / f".{final.name}{REPLACED_SUFFIX}"
    if replaced.exists():
        shutil.rmtree(replaced)
    if final.exists():
        # Two renames: the old folder stays whole (under the .replaced name) until the new one is in place.
        final.rename(replaced)
    staging.rename(final)
    _fsync_dir(final.parent)
    if replaced.exists():
        shutil.rmtree(replaced)
