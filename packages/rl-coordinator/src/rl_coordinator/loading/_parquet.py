"""Parquet rows read one row group at a time (pyarrow, imported only when a parquet file is opened)."""

from __future__ import annotations

import bisect
import os
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rl_coordinator._errors import CoordinatorInputError
from rl_coordinator.loading._sources import Row, RowSource

# A shuffled batch touches many row groups; keeping a couple decoded serves sequential reads and
# small files without holding a large file in memory.
_CACHED_ROW_GROUPS = 2


def _import_parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as error:
        raise ImportError(
            "reading parquet files needs pyarrow; install it with `pip install 'rl-coordinator[parquet]'`"
        ) from error
    return pq


class ParquetSource(RowSource):
    """Rows of a parquet file; a batch decodes each row group it touches once."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise CoordinatorInputError(f"parquet file {str(self.path)!r} does not exist or is not a file")
        self.name = str(self.path)
        self._lock = threading.Lock()
        self._file: Any = None
        parquet_file = self._open()
        metadata = parquet_file.metadata
        self._starts: list[int] = []
        total = 0
        for group in range(metadata.num_row_groups):
            self._starts.append(total)
            total += metadata.row_group(group).num_rows
        self._num_rows = total
        self._columns = tuple(parquet_file.schema_arrow.names)
        self._cache: OrderedDict[int, Any] = OrderedDict()

    def _open(self) -> Any:
        if self._file is None:
            self._file = _import_parquet().ParquetFile(self.path)
        return self._file

    def __len__(self) -> int:
        return self._num_rows

    def columns(self) -> tuple[str, ...]:
        """Column names from the file's schema."""
        return self._columns

    def _row_group(self, group: int) -> Any:
        table = self._cache.get(group)
        if table is None:
            table = self._open().read_row_group(group)
            self._cache[group] = table
            if len(self._cache) > _CACHED_ROW_GROUPS:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(group)
        return table

    def _read(self, index: int) -> Row:
        return self.rows([index])[0]

    def rows(self, indices: Sequence[int]) -> list[Row]:
        """Rows at `indices`, in that order."""
        by_group: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for position, index in enumerate(indices):
            self._check_index(index)
            group = bisect.bisect_right(self._starts, index) - 1
            by_group[group].append((position, int(index) - self._starts[group]))
        found: dict[int, Row] = {}
        with self._lock:
            for group, wanted in by_group.items():
                table = self._row_group(group)
                picked = table.take([local for _, local in wanted]).to_pylist()
                for (position, _), row in zip(wanted, picked, strict=True):
                    found[position] = row
        return [found[position] for position in range(len(indices))]

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_file"] = None
        state["_cache"] = OrderedDict()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self._lock = threading.Lock()
