"""Weight export: full tensors under Hugging Face names in size-bounded buckets, and a loadable HF folder.

Buckets are planned from the tensors' full shapes, then each bucket's shards are gathered together (one
collective per dtype, see `_gather.py`), so no process ever holds more than one bucket of full tensors (and
its gather buffer) beside its shards: never two full copies of the model. Gathering is a collective, so
every rank must run an export to its end.
"""

from __future__ import annotations

import copy
import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from rl_engines.training._atomic import prepare_staging, publish
from rl_engines.training._errors import TrainConfigError
from rl_engines.training._fsdp import ProcessLayout, barrier
from rl_engines.training._gather import gather_full_tensors

logger = logging.getLogger(__name__)

WeightBucket = list[tuple[str, torch.Tensor]]
"""`(Hugging Face name, full tensor)` pairs whose sizes add up to at most the bucket limit."""

DEFAULT_BUCKET_BYTES = 512 * 2**20
"""512 MiB: large enough to amortise a transfer's fixed cost, small beside a GPU's free memory."""

DEFAULT_SHARD_BYTES = 4 * 2**30
"""Hugging Face's conventional safetensors shard size for `export_hf`."""

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
COPIED_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
    "generation_config.json",
    "word_tokenizer.json",
    "preprocessor_config.json",
    "dataset_statistics.json",
    "rl_vla.json",
)
"""Files beside the weights in a source folder that a reloaded model needs (tokenizer, generation defaults, an
OpenVLA-OFT checkpoint's image preprocessing, action statistics and `rl_vla.json` settings)."""


def hf_named_tensors(backbone: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """Every parameter (tied ones once) and persistent buffer of the HF model, under its HF state-dict name."""
    yield from backbone.named_parameters()
    for module_name, module in backbone.named_modules():
        for buffer_name, buffer in module.named_buffers(recurse=False):
            if buffer is not None and buffer_name not in module._non_persistent_buffers_set:
                yield (f"{module_name}.{buffer_name}" if module_name else buffer_name), buffer


def check_bucket_bytes(bucket_bytes: object, where: str) -> None:
    """Refuse an export bucket size that is not an int > 0, naming `where` it was given."""
    if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, int) or bucket_bytes <= 0:
        raise TrainConfigError(
            f"{where}: bucket_bytes must be an int > 0, got {bucket_bytes!r}; pass the largest export bucket in bytes",
            field="bucket_bytes",
            expected="an int > 0",
            found=bucket_bytes,
            fix="pass the largest export bucket in bytes",
        )


def iter_weight_buckets(
    backbone: torch.nn.Module, bucket_bytes: int = DEFAULT_BUCKET_BYTES, dtype: torch.dtype | None = None
) -> Iterator[WeightBucket]:
    """Full tensors in buckets of at most `bucket_bytes` (a single larger tensor fills a bucket alone).

    Args:
        backbone: the (possibly FSDP2-sharded) Hugging Face model.
        bucket_bytes: > 0, the most bytes of tensors one bucket holds.
        dtype: cast each tensor to this dtype (e.g. the rollout engine's); None keeps the stored dtype.
    """
    check_bucket_bytes(bucket_bytes, "export_weights")
    planned: list[tuple[str, torch.Tensor]] = []
    size = 0
    with torch.no_grad():
        for name, tensor in hf_named_tensors(backbone):
            cast = dtype if dtype is not None and tensor.is_floating_point() else tensor.dtype
            nbytes = tensor.numel() * cast.itemsize
            if planned and size + nbytes > bucket_bytes:
                yield _gathered(planned, dtype)
                planned, size = [], 0
            planned.append((name, tensor.detach()))
            size += nbytes
        if planned:
            yield _gathered(planned, dtype)


def _gathered(planned: list[tuple[str, torch.Tensor]], dtype: torch.dtype | None) -> WeightBucket:
    """The bucket's full tensors (one collective per dtype), cast to `dtype` where floating point."""
    fulls = gather_full_tensors([tensor for _, tensor in planned])
    if dtype is not None:
        fulls = [full.to(dtype) if full.is_floating_point() else full for full in fulls]
    return [(name, full) for (name, _), full in zip(planned, fulls, strict=True)]


def _copy_side_files(source: Path | None, target: Path, hf_config: Any) -> None:
    if source is None:
        return
    # A remote-code model (an OpenVLA-OFT checkpoint) reloads only with the modules its config's auto_map names.
    auto_map = getattr(hf_config, "auto_map", None) or {}
    modules = {f"{reference.split('--')[-1].split('.')[0]}.py" for reference in auto_map.values()}
    for name in (*COPIED_FILES, *sorted(modules)):
        if (source / name).is_file() and not (target / name).is_file():
            shutil.copy2(source / name, target / name)


def _write_config(hf_config: Any, target: Path, dtype: torch.dtype) -> None:
    config = copy.deepcopy(hf_config)
    config.dtype = dtype
    config.save_pretrained(str(target))


def _name_shards(staging: Path, shard_maps: list[dict[str, int]]) -> None:
    """Rename the written shards to HF's names and write the index when there is more than one."""
    count = len(shard_maps)
    if count == 1:
        (staging / "shard-00000.safetensors").rename(staging / SINGLE_FILE)
        return
    weight_map: dict[str, str] = {}
    total = 0
    for index, shard in enumerate(shard_maps):
        final_name = f"model-{index + 1:05d}-of-{count:05d}.safetensors"
        (staging / f"shard-{index:05d}.safetensors").rename(staging / final_name)
        for name, nbytes in shard.items():
            weight_map[name] = final_name
            total += nbytes
    index_json = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (staging / INDEX_FILE).write_text(json.dumps(index_json, indent=2, sort_keys=True))


def export_hf(
    backbone: torch.nn.Module,
    hf_config: Any,
    path: str | Path,
    layout: ProcessLayout,
    *,
    dtype: torch.dtype | None = None,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    source_folder: Path | None = None,
) -> Path:
    """Write a folder that `AutoModelForCausalLM.from_pretrained` loads: config, safetensors (sharded with an
    index past `shard_bytes`), and the source folder's tokenizer files. Every rank calls it; rank 0 writes.
    The folder appears atomically at `path`."""
    final = Path(path)
    staging = prepare_staging(final) if layout.rank == 0 else None
    shard_maps: list[dict[str, int]] = []
    stored_dtype = dtype
    for bucket in iter_weight_buckets(backbone, shard_bytes, dtype):
        if staging is None:
            continue
        tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in bucket}
        stored_dtype = stored_dtype or next(t.dtype for t in tensors.values() if t.is_floating_point())
        save_file(tensors, str(staging / f"shard-{len(shard_maps):05d}.safetensors"), metadata={"format": "pt"})
        shard_maps.append({name: t.numel() * t.element_size() for name, t in tensors.items()})
    if staging is not None:
        _name_shards(staging, shard_maps)
        _write_config(hf_config, staging, stored_dtype or torch.float32)
        _copy_side_files(source_folder, staging, hf_config)
        publish(final)
        logger.info("exported %d weight files to %s", len(shard_maps), final)
    barrier(layout)
    return final
