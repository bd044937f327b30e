"""Random-access row sources: the interface, the schema check, in-memory datasets and `open_source`."""

from __future__ import annotations

import abc
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rl_coordinator._errors import CoordinatorInputError

Row = dict[str, Any]

_JSONL_SUFFIXES = (".jsonl", ".ndjson")
_PARQUET_SUFFIXES = (".parquet", ".pq")


class RowSource(abc.ABC):
    """A dataset of rows (dicts) read by global index; subclasses read only the rows asked for."""

    #: Human name used in error messages (a file path or a dataset description).
    name: str

    @abc.abstractmethod
    def __len__(self) -> int:
        """Number of rows."""

    @abc.abstractmethod
    def _read(self, index: int) -> Row:
        """Row `index`, already range-checked."""

    def where(self, index: int) -> str:
        """Where row `index` lives, for error messages ("data.jsonl row 4 (line 6)")."""
        return f"{self.name} row {index}"

    def columns(self) -> tuple[str, ...] | None:
        """Field names every row has, when known without reading rows; None otherwise."""
        return None

    def row(self, index: int) -> Row:
        """Row `index` as a dict."""
        self._check_index(index)
        return self._read(index)

    def rows(self, indices: Sequence[int]) -> list[Row]:
        """Rows at `indices`, in that order."""
        for index in indices:
            self._check_index(index)
        return [self._read(int(index)) for index in indices]

    def _check_index(self, index: int) -> None:
        if not 0 <= index < len(self):
            raise CoordinatorInputError(f"row index {index} is outside {self.name}, which has {len(self)} rows")


def check_row(row: Any, required_fields: Sequence[str], where: str) -> Row:
    """Return `row` if it is a mapping with every field of `required_fields` present and not None.

    Raises CoordinatorInputError naming `where` (file and row index) and the missing fields.
    """
    if not isinstance(row, Mapping):
        raise CoordinatorInputError(f"{where} is a {type(row).__name__}, expected a mapping of field names to values")
    missing = [name for name in required_fields if row.get(name) is None]
    if missing:
        raise CoordinatorInputError(
            f"{where} is missing required field(s) {missing} (absent or null); the row has fields {sorted(row)}"
        )
    return dict(row)


def check_columns(source: RowSource, required_fields: Sequence[str]) -> None:
    """Fail fast when the source's known columns lack a required field (every row would lack it)."""
    columns = source.columns()
    if columns is None:
        return
    missing = [name for name in required_fields if name not in columns]
    if missing:
        raise CoordinatorInputError(
            f"{source.where(0)} is missing required field(s) {missing}: {source.name} has no such column "
            f"(columns: {list(columns)})"
        )


class DatasetSource(RowSource):
    """Rows of an in-memory dataset: anything with `len()` and `__getitem__(int)` (e.g. `datasets.Dataset`).

    Batches use `__getitems__(list[int])` when the dataset has it (`datasets.Dataset` does), which
    reads a batch in one call instead of one per row.
    """

    def __init__(self, dataset: Any, *, name: str | None = None) -> None:
        if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
            raise CoordinatorInputError(
                f"dataset must support len() and [int] indexing, got {type(dataset).__name__}; "
                "pass a datasets.Dataset, a list of dicts or a RowSource"
            )
        self.dataset = dataset
        self.name = name or f"dataset {type(dataset).__name__}"

    def __len__(self) -> int:
        return len(self.dataset)

    def _read(self, index: int) -> Row:
        return self.dataset[index]

    def rows(self, indices: Sequence[int]) -> list[Row]:
        """Rows at `indices`, in that order."""
        for index in indices:
            self._check_index(index)
        batched = getattr(self.dataset, "__getitems__", None)
        if batched is not None and len(indices) > 0:
            return list(batched([int(index) for index in indices]))
        return [self._read(int(index)) for index in indices]

    def columns(self) -> tuple[str, ...] | None:
        """Column names when the dataset declares them (`column_names`), else None."""
        names = getattr(self.dataset, "column_names", None)
        if isinstance(names, (list, tuple)) and all(isinstance(name, str) for name in names):
            return tuple(names)
        return None


def open_source(source: RowSource | str | os.PathLike[str] | Any) -> RowSource:
    """Wrap `source` as a RowSource: a RowSource as is, a .jsonl/.ndjson or .parquet/.pq path, a Hugging Face
    `datasets` folder (saved with `save_to_disk`, or of data files) or .csv/.json file (the `datasets` extra),
    or an in-memory dataset."""
    if isinstance(source, RowSource):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise CoordinatorInputError(f"source file {str(path)!r} does not exist or is not a file or a folder")
        from rl_coordinator.loading._hf_datasets import BUILDER_SUFFIXES, needs_datasets, open_hf_dataset

        if needs_datasets(path):
            return open_hf_dataset(path)
        suffix = path.suffix.lower()
        if suffix in _JSONL_SUFFIXES:
            from rl_coordinator.loading._jsonl import JsonlSource

            return JsonlSource(path)
        if suffix in _PARQUET_SUFFIXES:
            from rl_coordinator.loading._parquet import ParquetSource

            return ParquetSource(path)
        known = [*_JSONL_SUFFIXES, *_PARQUET_SUFFIXES, *BUILDER_SUFFIXES]
        raise CoordinatorInputError(
            f"cannot tell the format of {str(path)!r} from its suffix {suffix!r}; "
            f"use one of {known}, a datasets folder, or pass a RowSource"
        )
    return DatasetSource(source)
