"""Small datasets written to tmp_path for the loader tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def make_rows(n: int) -> list[dict[str, Any]]:
    """Rows whose content is a function of their index, so a row read back identifies its index."""
    return [{"prompt": f"q{i}", "answer": str(i * i), "id": i} for i in range(n)]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]], row_group_size: int = 3) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
    return path
