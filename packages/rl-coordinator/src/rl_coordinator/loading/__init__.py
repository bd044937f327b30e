"""Sharded data loading: each data-parallel rank reads only its shard of a seeded epoch permutation.

Sources are JSON-lines files (indexed by line offset), parquet files (pyarrow, from the
`rl-coordinator[parquet]` extra), Hugging Face `datasets` folders (`save_to_disk`, or local data files) and
.csv/.json files (the `rl-coordinator[datasets]` extra), and in-memory datasets such as `datasets.Dataset`.
"""

from rl_coordinator.loading._hf_datasets import datasets_installed, needs_datasets, open_hf_dataset
from rl_coordinator.loading._jsonl import JsonlSource
from rl_coordinator.loading._parquet import ParquetSource
from rl_coordinator.loading._sharded_loader import LoaderBatch, ShardedLoader, epoch_permutation
from rl_coordinator.loading._sources import DatasetSource, RowSource, check_row, open_source

__all__ = [
    "DatasetSource",
    "JsonlSource",
    "LoaderBatch",
    "ParquetSource",
    "RowSource",
    "ShardedLoader",
    "check_row",
    "datasets_installed",
    "epoch_permutation",
    "needs_datasets",
    "open_hf_dataset",
    "open_source",
]
