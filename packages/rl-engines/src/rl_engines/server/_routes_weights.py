"""Weight routes: updates from disk / tensor handles / a broadcast group, versions and checksums.

SGLang's optional fields are honoured: `flush_cache` flushes after a successful update, `abort_all_requests`
aborts in-flight requests first and `weight_version` labels the new weights. An update without a version keeps
serving, as SGLang does (its clients never send one): the version becomes the previous one plus 1, so outputs
still name a version that identifies the weights they came from. Our extension `require_version: true` (sent by
`RemoteEngine`) keeps the InferenceEngine contract instead: `/generate` answers 503 until `/update_weight_version`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import torch

from rl_engines.remote import deserialize_named_tensors
from rl_engines.rollout import (
    DEFAULT_GROUP_NAME,
    EngineStateError,
    InvalidRequestError,
    SharedTensorBucket,
    WeightGroupSpec,
    WeightsMeta,
)
from rl_engines.rollout._types import weight_version_from_wire, weight_version_to_wire
from rl_engines.server._body import check_fields, field, read_json, required
from rl_engines.server._fastapi import FastAPI, JSONResponse, Request
from rl_engines.server._responses import error_response, success
from rl_engines.server._state import ServerState

_COMMON = ("flush_cache", "abort_all_requests", "weight_version", "load_format", "require_version")
_DIRECT_FORMATS = (None, "direct")
"""Load formats meaning "tensors as named": SGLang's `flattened_bucket` needs its own classes, so it is refused."""


def _check_load_format(body: Mapping[str, Any], where: str) -> None:
    if body.get("load_format") not in _DIRECT_FORMATS:
        raise InvalidRequestError(
            f"{where}: load_format={body['load_format']!r} is not supported; send null (named tensors)"
        )


def _apply(state: ServerState, body: Mapping[str, Any], where: str, update: Callable[[], None]) -> str:
    """Run `update` with SGLang's pre/post options; returns the success message (runs on a pool thread)."""
    label = field(body, "weight_version", str, where)  # SGLang's wire spells the version as a str
    version = None if label is None else weight_version_from_wire(label, f"{where}: weight_version")
    if field(body, "abort_all_requests", bool, where, False):
        state.engine.abort(None)
    previous = state.engine.weight_version()
    update()
    if field(body, "flush_cache", bool, where, True):
        state.engine.flush_cache()
    if version is not None:
        state.engine.set_weight_version(version)
        return f"Succeeded to update model weights. Weight version updated to {version}."
    if field(body, "require_version", bool, where, False):
        # Our client's contract: no output may carry a version until the sender names the new weights.
        return "Succeeded to update model weights. Generation waits for /update_weight_version."
    state.engine.set_weight_version(previous + 1)
    return f"Succeeded to update model weights. No weight_version was sent; the version is now {previous + 1}."


def _named_tensors(body: Mapping[str, Any], where: str) -> list[tuple[str, torch.Tensor]] | SharedTensorBucket:
    payloads = body.get("serialized_named_tensors")
    bucket = body.get("shared_bucket")
    if (payloads is None) == (bucket is None):
        raise InvalidRequestError(f"{where}: send exactly one of serialized_named_tensors and shared_bucket")
    if bucket is not None:
        if not isinstance(bucket, dict):
            raise InvalidRequestError(f"{where}: shared_bucket must be an object (SharedTensorBucket.to_json())")
        return SharedTensorBucket.from_json(bucket)
    if not isinstance(payloads, list) or len(payloads) != 1:
        count = len(payloads) if isinstance(payloads, list) else type(payloads).__name__
        raise InvalidRequestError(
            f"{where}: serialized_named_tensors must be a list with one payload (this server has one "
            f"tensor-parallel rank), got {count}"
        )
    return deserialize_named_tensors(payloads[0])


def _from_disk(state: ServerState, body: Mapping[str, Any], where: str) -> str:
    path = required(body, "model_path", str, where)
    return _apply(state, body, where, lambda: state.engine.update_weights_from_disk(path))


def _from_tensor(state: ServerState, body: Mapping[str, Any], where: str) -> tuple[str, dict[str, Any]]:
    tensors = _named_tensors(body, where)
    lent: list[str] = []

    def update() -> None:
        # `tensors` are views of the sender's memory: the engine copies them, or (a lent bucket) keeps them.
        lent.extend(sorted(state.engine.update_weights_from_tensors(tensors) or ()))

    message = _apply(state, body, where, update)
    # Our addition: the lent buffers the engine now uses as weights, which the sender must not rewrite.
    return message, {"lent_buffers": lent}


def _port(value: int | str, where: str) -> int:
    """`master_port` as an int: SGLang coerces numeric strings (AReaL sends one), so this server does too."""
    if isinstance(value, str):
        if not value.strip().isdigit():
            raise InvalidRequestError(f"{where}: master_port must be an int or a numeric string, got {value!r}")
        return int(value)
    return value


def _init_group(state: ServerState, body: Mapping[str, Any], where: str) -> str:
    timeout = field(body, "timeout_s", (int, float), where)
    spec = WeightGroupSpec(
        master_address=required(body, "master_address", str, where),
        master_port=_port(required(body, "master_port", (int, str), where), where),
        rank_offset=required(body, "rank_offset", int, where),
        world_size=required(body, "world_size", int, where),
        group_name=field(body, "group_name", str, where, DEFAULT_GROUP_NAME),
        backend=field(body, "backend", str, where, "nccl" if torch.cuda.is_available() else "gloo"),
        **({"timeout_s": float(timeout)} if timeout is not None else {}),
    )
    state.engine.init_weights_update_group(spec)
    state.group_name = spec.group_name
    return f"Initialized weight update group {spec.group_name!r} as rank {spec.rank_offset}."


def _check_group(state: ServerState, body: Mapping[str, Any], where: str) -> None:
    name = field(body, "group_name", str, where, DEFAULT_GROUP_NAME)
    if state.group_name is None:
        raise EngineStateError(f"{where}: no weight update group; call /init_weights_update_group first")
    if name != state.group_name:
        raise InvalidRequestError(f"{where}: group_name {name!r} is not the open group {state.group_name!r}")


def _from_distributed(state: ServerState, body: Mapping[str, Any], where: str) -> str:
    _check_group(state, body, where)
    meta = WeightsMeta(
        names=tuple(required(body, "names", list, where)),
        dtypes=tuple(required(body, "dtypes", list, where)),
        shapes=tuple(tuple(s) for s in required(body, "shapes", list, where)),
    )
    return _apply(state, body, where, lambda: state.engine.update_weights_from_distributed(meta))


def _destroy_group(state: ServerState, body: Mapping[str, Any], where: str) -> str:
    _check_group(state, body, where)
    state.engine.destroy_weights_update_group()
    state.group_name = None
    return "Destroyed the weight update group."


def _set_version(state: ServerState, body: Mapping[str, Any], where: str) -> str:
    version = weight_version_from_wire(required(body, "new_version", str, where), f"{where}: new_version")
    if field(body, "abort_all_requests", bool, where, False):
        state.engine.abort(None)
    state.engine.set_weight_version(version)
    return f"Weight version updated to {version}"


_GROUP_FIELDS = ("master_address", "master_port", "rank_offset", "world_size", "group_name", "backend", "timeout_s")
_UPDATES: dict[str, tuple[tuple[str, ...], Callable[[ServerState, Mapping[str, Any], str], Any]]] = {
    "update_weights_from_disk": (("model_path", *_COMMON), _from_disk),
    "update_weights_from_tensor": (("serialized_named_tensors", "shared_bucket", *_COMMON), _from_tensor),
    "init_weights_update_group": (_GROUP_FIELDS, _init_group),
    "update_weights_from_distributed": (("names", "dtypes", "shapes", "group_name", *_COMMON), _from_distributed),
    "destroy_weights_update_group": (("group_name",), _destroy_group),
    "update_weight_version": (("new_version", "abort_all_requests"), _set_version),
}
"""Each weight route: its fields and its handler (run on the control pool). Answers are SGLang's
`{"success", "message"}`."""


def _weight_route(state: ServerState, where: str) -> Callable[[Request], Any]:
    known, handle = _UPDATES[where]

    async def route(request: Request) -> Any:
        try:
            body = await read_json(request, state.config.max_request_bytes)
            check_fields(body, known, where)
            _check_load_format(body, where)
            if where == "init_weights_update_group":
                message = await state.rendezvous(handle, state, body, where)
            else:
                message = await state.control(handle, state, body, where)
        except Exception as error:
            return error_response(error, weights=True)
        message, extra = message if isinstance(message, tuple) else (message, {})
        if where == "update_weight_version":
            extra = {"new_version": body["new_version"]}
        return success(message, **extra)

    return route


def register_weight_routes(app: FastAPI, state: ServerState) -> None:
    """Add the weight-update, version and checksum routes to `app`."""
    for where in _UPDATES:
        app.post(f"/{where}")(_weight_route(state, where))

    @app.get("/get_weight_version")
    async def get_weight_version() -> Any:
        return JSONResponse({"weight_version": weight_version_to_wire(state.engine.weight_version())})

    @app.post("/weights_checksum")
    async def weights_checksum(request: Request) -> Any:
        where = "weights_checksum"
        body = await read_json(request, state.config.max_request_bytes)
        check_fields(body, ("names",), where)
        names = field(body, "names", list, where)
        return JSONResponse({"checksum": await state.control(state.engine.weights_checksum, names)})


def model_path_of(state: ServerState) -> str | None:
    """The served model's path for `/model_info` (the config's, else the engine config's)."""
    if state.config.model_path is not None:
        return os.fspath(state.config.model_path)
    engine_config = getattr(state.engine, "config", None)
    return getattr(engine_config, "model_path", None)
