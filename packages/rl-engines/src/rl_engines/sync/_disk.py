"""Weights over a shared filesystem: one safetensors file per bucket, an HF index and a manifest, atomically.

Layout of `root/weights-<version>/`:
    bucket-00000.safetensors ...        one per bucket, tensors as sent
    model.safetensors.index.json        HF's sharded-checkpoint index (`weight_map`), so any HF loader,
                                        vLLM `reload_weights(weights_path=...)` or SGLang can read it
    rl_manifest.json                    version, names, dtypes and shapes
`root/LATEST` names the newest complete directory. Files are written into a hidden staging directory,
fsynced, and the directory is renamed into place, so a reader never sees a partial version.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path

import torch
from safetensors.torch import save_file

from rl_engines.rollout import dtype_name
from rl_engines.sync._errors import SyncConfigError, SyncError
from rl_engines.sync._transport import Bucket, SyncContext

logger = logging.getLogger(__name__)

INDEX_FILE = "model.safetensors.index.json"
MANIFEST_FILE = "rl_manifest.json"
LATEST_FILE = "LATEST"
_DIR_PREFIX = "weights-"


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _own_storage(bucket: Bucket) -> dict[str, torch.Tensor]:
    """CPU, contiguous tensors that share no storage (safetensors refuses shared ones, e.g. tied weights)."""
    out, seen = {}, set()
    for name, tensor in bucket:
        t = tensor.detach().to("cpu").contiguous()
        key = t.untyped_storage().data_ptr()
        if key in seen or t.untyped_storage().nbytes() != t.nbytes:
            t = t.clone()
        seen.add(key)
        out[name] = t
    return out


class DiskTransport:
    """Writes each sync to `root/weights-<version>/` and has every engine load it from there."""

    name = "disk"
    capability = "disk"

    def __init__(self, root: str | os.PathLike[str], *, keep_last: int = 2, fsync: bool = True) -> None:
        if keep_last < 1:
            raise SyncConfigError(f"DiskTransport keep_last must be >= 1, got {keep_last}")
        self.root = Path(root)
        self.keep_last = keep_last
        self.fsync = fsync
        self._staging: Path | None = None
        self._weight_map: dict[str, str] = {}
        self._records: list[tuple[str, str, list[int]]] = []
        self._total = 0
        self.last_path: Path | None = None

    def begin(self, ctx: SyncContext) -> None:
        """Create a fresh staging directory under `root`."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._staging = self.root / f".staging-{uuid.uuid4().hex}"
        self._staging.mkdir()
        self._weight_map, self._records, self._total = {}, [], 0

    def send(self, ctx: SyncContext, bucket: Bucket) -> None:
        """Write the bucket as the next `bucket-NNNNN.safetensors`."""
        if self._staging is None:
            raise SyncError("DiskTransport.send before begin; WeightSync calls begin first")
        file = self._staging / f"bucket-{len({*self._weight_map.values()}):05d}.safetensors"
        tensors = _own_storage(bucket)
        save_file(tensors, str(file), metadata={"version": str(ctx.version)})  # safetensors metadata is str
        if self.fsync:
            _fsync(file)
        for name, tensor in tensors.items():
            self._weight_map[name] = file.name
            self._records.append((name, dtype_name(tensor.dtype), list(tensor.shape)))
            self._total += tensor.nbytes

    def finish(self, ctx: SyncContext) -> None:
        """Write index and manifest, publish the directory atomically, and have every engine load it."""
        staging = self._staging
        if staging is None:
            raise SyncError("DiskTransport.finish before begin")
        index = {"metadata": {"total_size": self._total}, "weight_map": self._weight_map}
        (staging / INDEX_FILE).write_text(json.dumps(index, indent=1))
        manifest = {
            "version": ctx.version,
            "created_unix_s": time.time(),
            "tensors": [{"name": n, "dtype": d, "shape": s} for n, d, s in self._records],
            "files": sorted(set(self._weight_map.values())),
        }
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1))
        if self.fsync:
            _fsync(staging / INDEX_FILE)
            _fsync(staging / MANIFEST_FILE)
            _fsync(staging)
        final = self._publish(staging, ctx.version)
        self._staging = None
        ctx.call_each(lambda engine: engine.update_weights_from_disk(str(final)), "update_weights_from_disk")
        self._prune(final)

    def _publish(self, staging: Path, version: int) -> Path:
        final = self.root / f"{_DIR_PREFIX}{version}"
        if final.exists():  # the same version re-sent: move the old copy aside, then swap
            trash = self.root / f".trash-{uuid.uuid4().hex}"
            final.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)
        staging.rename(final)
        latest_tmp = self.root / f".{LATEST_FILE}.{uuid.uuid4().hex}"
        latest_tmp.write_text(final.name + "\n")
        os.replace(latest_tmp, self.root / LATEST_FILE)
        if self.fsync:
            _fsync(self.root)
        self.last_path = final
        logger.info("published weights version %r to %s", version, final)
        return final

    def _prune(self, keep: Path) -> None:
        dirs = [p for p in self.root.glob(f"{_DIR_PREFIX}*") if p.is_dir() and p != keep]
        dirs.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        for old in dirs[self.keep_last - 1 :]:
            shutil.rmtree(old, ignore_errors=True)

    def cancel(self, ctx: SyncContext) -> None:
        """Remove the unfinished staging directory."""
        self.close(ctx)

    def close(self, ctx: SyncContext) -> None:
        """Remove an unfinished staging directory."""
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None


def read_manifest(path: str | os.PathLike[str]) -> dict:
    """The `rl_manifest.json` of a published weights directory."""
    return json.loads((Path(path) / MANIFEST_FILE).read_text())
