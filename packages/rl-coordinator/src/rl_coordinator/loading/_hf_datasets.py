"""Hugging Face `datasets` sources: a folder written by `save_to_disk`, a local folder of data files, or a
`.csv` / `.json` file, each read through `datasets` (the `rl-coordinator[datasets]` extra, imported only here).

The loaded `datasets.Dataset` is an in-memory (memory-mapped Arrow) table with `len()` and `[int]`, so the
`ShardedLoader` shards and resumes it exactly as it does a jsonl file: by row index of a seeded permutation.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from rl_coordinator._errors import CoordinatorInputError
from rl_coordinator.loading._sources import DatasetSource

BUILDER_SUFFIXES = {".csv": "csv", ".json": "json"}
"""File suffixes read with `datasets.load_dataset(<builder>, data_files=...)` (`.jsonl` and `.parquet` have their
own readers, which need no `datasets`)."""
SAVED_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")
"""Files `Dataset.save_to_disk` / `DatasetDict.save_to_disk` write: a folder with one is read by `load_from_disk`."""
PIP_LINE = "pip install 'rl-coordinator[datasets]'"
_SPLIT = "train"
"""The split `load_dataset` names the rows of local files when no split is configured."""


def needs_datasets(path: str | Path) -> bool:
    """True when `path` is read through `datasets`: a folder, or a file with a `BUILDER_SUFFIXES` suffix."""
    path = Path(path)
    return path.is_dir() or path.suffix.lower() in BUILDER_SUFFIXES


def datasets_installed() -> bool:
    """Whether the `datasets` package can be imported."""
    return importlib.util.find_spec("datasets") is not None


def _import_datasets() -> Any:
    try:
        return importlib.import_module("datasets")
    except ImportError as exc:
        raise CoordinatorInputError(f"reading a Hugging Face dataset needs `datasets`; {PIP_LINE}") from exc


def open_hf_dataset(path: str | Path) -> DatasetSource:
    """The rows of `path` as a `DatasetSource`: a `save_to_disk` folder (one `Dataset`, or a `DatasetDict` split's
    subfolder), another folder (`load_dataset(folder)`, which infers the builder from its files), or a `.csv` /
    `.json` file (`load_dataset("csv" | "json", data_files=path)`); local files only, nothing is downloaded."""
    path = Path(path)
    datasets = _import_datasets()
    if path.is_dir():
        if any((path / marker).is_file() for marker in SAVED_MARKERS):
            loaded = datasets.load_from_disk(str(path))
            if isinstance(loaded, datasets.DatasetDict):
                splits = ", ".join(sorted(loaded))
                raise CoordinatorInputError(
                    f"{str(path)!r} holds a DatasetDict with splits {splits}; give one split's folder, e.g. "
                    f"{str(path / sorted(loaded)[0])!r}"
                )
        else:
            loaded = _load(datasets, path, str(path))
    elif path.suffix.lower() in BUILDER_SUFFIXES:
        loaded = _load(datasets, path, BUILDER_SUFFIXES[path.suffix.lower()], data_files=str(path))
    else:
        raise CoordinatorInputError(f"{str(path)!r} is neither a folder nor a {' or '.join(BUILDER_SUFFIXES)} file")
    return DatasetSource(loaded, name=str(path))


def _load(datasets: Any, path: Path, builder: str, **kwargs: Any) -> Any:
    try:
        return datasets.load_dataset(builder, split=_SPLIT, **kwargs)
    except Exception as exc:  # datasets raises many types (FileNotFoundError, DatasetGenerationError, ValueError)
        raise CoordinatorInputError(
            f"{str(path)!r} could not be read with datasets.load_dataset: {type(exc).__name__}: {exc}"
        ) from None
