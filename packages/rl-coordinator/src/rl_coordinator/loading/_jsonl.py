"""JSON-lines rows read by seeking to indexed line offsets, so a huge file is never loaded whole."""

from __future__ import annotations

import json
import logging
import os
import threading
from array import array
from pathlib import Path
from typing import IO, Any

from rl_coordinator._errors import CoordinatorInputError
from rl_coordinator.loading._sources import Row, RowSource

logger = logging.getLogger(__name__)

# 'q' is a signed 64-bit int: 8 bytes per row for offsets and 8 for line numbers, against ~100+ for Python ints.
_INDEX_TYPECODE = "q"


class JsonlSource(RowSource):
    """Rows of a JSON-lines file, one JSON object per non-blank line.

    Line offsets are indexed once at construction (one streaming pass); each row read seeks to its
    line and parses only that line. Blank lines are skipped and do not count as rows. The open file
    handle is not pickled: a copy sent to another process reopens the file on first read.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise CoordinatorInputError(f"jsonl file {str(self.path)!r} does not exist or is not a file")
        self.name = str(self.path)
        self._offsets = array(_INDEX_TYPECODE)
        self._line_numbers = array(_INDEX_TYPECODE)
        position = 0
        with self.path.open("rb") as handle:
            for line_number, raw in enumerate(handle, start=1):
                if raw.strip():
                    self._offsets.append(position)
                    self._line_numbers.append(line_number)
                position += len(raw)
        logger.debug("indexed %d rows of %s", len(self._offsets), self.name)
        self._handle: IO[bytes] | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._offsets)

    def line_number(self, index: int) -> int:
        """1-based line number of row `index` in the file."""
        self._check_index(index)
        return self._line_numbers[index]

    def where(self, index: int) -> str:
        """File, row index and line number of row `index`."""
        if 0 <= index < len(self):
            return f"{self.name} row {index} (line {self._line_numbers[index]})"
        return f"{self.name} row {index}"

    def _read(self, index: int) -> Row:
        with self._lock:
            if self._handle is None:
                self._handle = self.path.open("rb")
            self._handle.seek(self._offsets[index])
            raw = self._handle.readline()
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as error:
            raise CoordinatorInputError(
                f"{self.where(index)} is not valid JSON: {error.msg} at column {error.colno}; fix or remove the line"
            ) from None
        except UnicodeDecodeError as error:
            raise CoordinatorInputError(f"{self.where(index)} is not valid UTF-8: {error.reason}") from None
        if not isinstance(row, dict):
            raise CoordinatorInputError(
                f"{self.where(index)} is a JSON {type(row).__name__}, expected a JSON object (one row per line)"
            )
        return row

    def close(self) -> None:
        """Close the file handle (reopened on the next read)."""
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_handle"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self._lock = threading.Lock()

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None:
            handle.close()
