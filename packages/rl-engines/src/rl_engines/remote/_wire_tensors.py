"""Named tensors by handle, in SGLang's `update_weights_from_tensor` format: base64 of a ForkingPickler dump.

Only handles cross the wire: a CPU tensor travels as the name of a POSIX shared-memory file (torch's
`file_system` sharing strategy, used here whatever the process-wide strategy is, because the default
`file_descriptor` one cannot reach an unrelated process), a CUDA tensor as a CUDA IPC handle (same host and
GPU). The receiver maps the sender's memory without a copy; the sender must keep the tensors alive and
unchanged until the receiver's update call has returned.

A CPU tensor whose storage is not yet shared is moved into shared memory in place (one copy, once); later
sends of the same tensor cost nothing.

Decoding never runs arbitrary pickled code: a restricted unpickler admits only torch's tensor-rebuilding
functions and the classes and dtypes they need, so a hostile payload fails with `InvalidRequestError`.
"""

from __future__ import annotations

import base64
import binascii
import io
import pickle
from collections.abc import Sequence
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch
import torch.multiprocessing  # registers torch's ForkingPickler reductions
from torch.multiprocessing.reductions import (
    StorageWeakRef,
    rebuild_storage_empty,
    rebuild_storage_filename,
    shared_cache,
)

from rl_engines.rollout import InvalidRequestError

_PROTOCOL = 4
"""Protocol 4 writes bytes as bytes (protocol 2 needs `_codecs.encode`, which the decoder would have to admit)."""
_REDUCTIONS = "torch.multiprocessing.reductions"
_ALLOWED: dict[str, frozenset[str]] = {
    _REDUCTIONS: frozenset(
        {
            "rebuild_tensor",
            "rebuild_cuda_tensor",
            "rebuild_typed_storage",
            "rebuild_typed_storage_child",
            "rebuild_storage_filename",
            "rebuild_storage_empty",
        }
    ),
    "torch": frozenset({"Tensor", "Size", "UntypedStorage"}),
    "torch.storage": frozenset({"UntypedStorage", "TypedStorage"}),
    "torch.nn.parameter": frozenset({"Parameter"}),
}


def _reduce_storage_file_system(storage: torch.UntypedStorage) -> tuple:
    """torch's `reduce_storage` for the `file_system` strategy, whatever the process-wide strategy is."""
    if storage.size() == 0:
        return (rebuild_storage_empty, (type(storage),))
    metadata = storage._share_filename_cpu_()
    storage._shared_incref()  # the reference the receiver's rebuild consumes (torch's protocol)
    shared_cache[metadata[1]] = StorageWeakRef(storage)
    return (rebuild_storage_filename, (type(storage), *metadata))


class _HandlePickler(ForkingPickler):
    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, _PROTOCOL)
        self.dispatch_table[torch.UntypedStorage] = _reduce_storage_file_system


class _HandleUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if name in _ALLOWED.get(module, ()):
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        if module == _REDUCTIONS and name == "rebuild_storage_fd":
            # What sglang's and verl's adapters send for a CPU tensor under torch's default sharing strategy.
            raise InvalidRequestError(
                f"the tensor payload shares CPU memory by file descriptor ({module}.{name}), which only a process "
                "the sender started can fetch; call torch.multiprocessing.set_sharing_strategy('file_system') in the "
                "sender before pickling"
            )
        raise InvalidRequestError(
            f"the tensor payload references {module}.{name}, which is not a tensor-rebuilding function; "
            "send base64(ForkingPickler.dumps(list of (name, tensor)))"
        )


def serialize_named_tensors(named: Sequence[tuple[str, torch.Tensor]]) -> str:
    """Base64 text of a ForkingPickler dump of `[(name, tensor), ...]` holding handles, not data."""
    pairs = [(str(name), tensor.detach()) for name, tensor in named]
    buffer = io.BytesIO()
    _HandlePickler(buffer).dump(pairs)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def deserialize_named_tensors(payload: str) -> list[tuple[str, torch.Tensor]]:
    """The `(name, tensor)` pairs of a `serialize_named_tensors` payload, as views of the sender's memory.

    Raises `InvalidRequestError` for bad base64, a disallowed or malformed pickle, or unmappable handles.
    """
    if not isinstance(payload, str):
        raise InvalidRequestError(f"a serialized tensor payload must be a base64 str, got {type(payload).__name__}")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as error:
        raise InvalidRequestError(f"the tensor payload is not valid base64: {error}") from None
    try:
        value = _HandleUnpickler(io.BytesIO(data)).load()
    except InvalidRequestError:
        raise
    except Exception as error:
        raise InvalidRequestError(f"cannot rebuild tensors from the payload: {type(error).__name__}: {error}") from None
    if not isinstance(value, list) or not all(
        isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], torch.Tensor)
        for item in value
    ):
        raise InvalidRequestError("the tensor payload must decode to a list of (name: str, tensor) pairs")
    return value
