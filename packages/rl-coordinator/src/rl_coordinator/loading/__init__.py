"""Sharded data loading: each data-parallel rank reads only its shard of a seeded epoch permutation.

Sources are JSON-lines files (indexed by line offset), parquet files (pyarrow, from the
`rl-coordinator[parquet]` extra) and in-memory datasets such as `datasets.Dataset`.
"""

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
    "epoch_permutation",
    "open_source",
]
