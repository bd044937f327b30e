"""Reads the history rows back out of a wandb offline run file (`run-<id>.wandb`), for the wandb sink test.

The file is a LevelDB-style log: a 7-byte header (":W&B", magic, version), then 32 KiB blocks of chunks, each
a 7-byte header (crc32, little-endian length, type: 1 full, 2 first, 3 middle, 4 last) and its bytes; the
joined chunks of one record are a protobuf `wandb_internal_pb2.Record`.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

FILE_HEADER_BYTES = 7
CHUNK_HEADER = struct.Struct("<IHB")
BLOCK_BYTES = 32 * 1024
FULL, LAST = 1, 4
POLL_S = 0.1


def _records(data: bytes) -> list[bytes]:
    records: list[bytes] = []
    pending = b""
    position = FILE_HEADER_BYTES
    while position + CHUNK_HEADER.size <= len(data):
        left_in_block = BLOCK_BYTES - position % BLOCK_BYTES
        if left_in_block < CHUNK_HEADER.size:  # block trailer padding
            position += left_in_block
            continue
        _, length, kind = CHUNK_HEADER.unpack_from(data, position)
        position += CHUNK_HEADER.size
        pending += data[position : position + length]
        position += length
        if kind in (FULL, LAST):
            records.append(pending)
            pending = b""
    return records


def _parsed(run_file: Path) -> list[Any]:
    from wandb.proto import wandb_internal_pb2

    parsed = []
    for raw in _records(run_file.read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        parsed.append(record)
    return parsed


def history_rows(run_file: Path, timeout_s: float) -> list[dict[str, Any]]:
    """The rows `run.log` wrote, in order, keyed by metric name (wandb adds `_step`, `_runtime`, `_timestamp`).

    `run.finish()` can return before wandb's service process has written the file out, so this waits up to
    `timeout_s` for the run's exit record.
    """
    deadline = time.monotonic() + timeout_s
    records = _parsed(run_file)
    while not any(record.WhichOneof("record_type") == "exit" for record in records):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{run_file} has no exit record after {timeout_s} s")
        time.sleep(POLL_S)
        records = _parsed(run_file)
    return [
        {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
        for record in records
        if record.WhichOneof("record_type") == "history"
    ]
