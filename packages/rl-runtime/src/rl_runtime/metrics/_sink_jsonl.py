"""The `jsonl` sink: one JSON object per step appended to `metrics.jsonl`, and the reader that takes it back."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rl_runtime.metrics._sink import SinkContext, register_sink

logger = logging.getLogger(__name__)

JSONL_FILE_NAME = "metrics.jsonl"
STEP_KEY = "step"
"""The record field holding the step number; the metrics sit beside it."""
_NEWLINE = b"\n"


class JsonlSink:
    """Appends `{"step": step, **metrics}` as one line per step to a file, flushed to the OS at once.

    Each line goes to the kernel in one `write` on a file opened with O_APPEND, so a line is never interleaved
    with another writer's and a crash leaves at most a torn last line. A resumed run (`start_step` > 0) first cuts
    the file back to the records of steps up to `start_step` (the steps its checkpoint holds), so the steps it
    replays are never in the file twice; `read_metrics_jsonl` still keeps the latest record of a step logged twice
    by anything else. NaN and infinities are written as Python's `json` writes them (`NaN`, `Infinity`), which
    `json` and pandas read back.
    """

    def __init__(self, path: Path, start_step: int = 0) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        if start_step > 0 and path.is_file():
            _cut_after(path, start_step)
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if _ends_with_torn_line(path):
            # A crash cut the last line short; start ours on a fresh line so the reader can skip the torn one.
            self._write(_NEWLINE)

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            raise ValueError(f"the jsonl sink writing {self.path} is closed")
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Append the record of `step`."""
        self._write(json.dumps({STEP_KEY: step, **metrics}).encode() + _NEWLINE)

    def close(self) -> None:
        """Close the file; closing twice is harmless."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _cut_after(path: Path, last_step: int) -> None:
    """Rewrite `path` (atomically) without the records of steps after `last_step` and without torn lines."""
    kept, dropped = [], 0
    for line in path.read_bytes().splitlines(keepends=True):
        try:
            step = json.loads(line).get(STEP_KEY) if line.strip() else None
        except (ValueError, AttributeError):  # a torn line, or one that is not a record
            step = None
        if isinstance(step, int) and step <= last_step:
            kept.append(line if line.endswith(_NEWLINE) else line + _NEWLINE)
        elif line.strip():
            dropped += 1
    if dropped:
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_bytes(b"".join(kept))
        os.replace(temporary, path)
        logger.info("%s: removed %d records after step %d, which this resumed run replays", path, dropped, last_step)


def _ends_with_torn_line(path: Path) -> bool:
    with path.open("rb") as file:
        if file.seek(0, os.SEEK_END) == 0:
            return False
        file.seek(-1, os.SEEK_END)
        return file.read(1) != _NEWLINE


@register_sink("jsonl")
def jsonl_sink(context: SinkContext) -> JsonlSink:
    """A `JsonlSink` writing `run_dir/metrics.jsonl`."""
    return JsonlSink(context.run_dir / JSONL_FILE_NAME, context.start_step)


def read_metrics_jsonl(path: Path | str) -> dict[int, dict[str, Any]]:
    """The records of a `metrics.jsonl` by step (without the `step` field); a step logged again (a resumed
    run) keeps its latest record, and a torn line (a crash mid-write) is skipped with a warning."""
    records: dict[int, dict[str, Any]] = {}
    with Path(path).open(encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                logger.warning("skipping unreadable line %d of %s (a write cut short?)", number, path)
                continue
            step = record.pop(STEP_KEY)
            records[step] = record
    return records
