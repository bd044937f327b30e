"""Read-only routes describing the server: model and server info, OpenAI's model list, engine status."""

from __future__ import annotations

import importlib.metadata
from typing import Any

from rl_engines.rollout._types import weight_version_to_wire
from rl_engines.server._fastapi import FastAPI, JSONResponse
from rl_engines.server._routes_weights import model_path_of
from rl_engines.server._state import ServerState


def _package_version() -> str:
    try:
        return importlib.metadata.version("rl-engines")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "unknown"


def register_info_routes(app: FastAPI, state: ServerState) -> None:
    """Add `/model_info`, `/server_info`, `/v1/models` and `/engine_status` (and SGLang's aliases) to `app`."""
    engine = state.engine

    def info() -> dict[str, Any]:
        return {
            "model_path": model_path_of(state),
            "tokenizer_path": None,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": weight_version_to_wire(engine.weight_version()),
            "capabilities": sorted(engine.capabilities),
            "logprob_mode": engine.logprob_mode,
            "context_len": getattr(engine, "context_len", None),
            "vocab_size": getattr(engine, "vocab_size", None),
        }

    app.get("/model_info")(lambda: JSONResponse(info()))
    app.get("/get_model_info")(lambda: JSONResponse(info()))

    def server_info() -> dict[str, Any]:
        # SGLang answers its server arguments plus internal state; these are ours under its key names.
        return {
            **info(),
            "host": state.config.host,
            "port": state.config.port,
            "max_request_bytes": state.config.max_request_bytes,
            "incremental_streaming_output": state.config.incremental_stream,
            "api_key_required": state.config.api_key is not None,
            "weight_group_rendezvous_waiting": state.groups_joining,
            "version": _package_version(),
        }

    app.get("/server_info")(lambda: JSONResponse(server_info()))
    app.get("/get_server_info")(lambda: JSONResponse(server_info()))

    @app.get("/v1/models")
    async def models() -> Any:
        name = model_path_of(state) or "rl-engines-model"
        card = {"id": name, "object": "model", "created": 0, "owned_by": "rl-engines", "root": name}
        context_len = getattr(engine, "context_len", None)
        if context_len is not None:
            card["max_model_len"] = context_len
        return JSONResponse({"object": "list", "data": [card]})

    @app.get("/engine_status")
    async def engine_status() -> Any:
        status = engine.status()
        return JSONResponse(
            {
                "state": status.state,
                "weight_version": weight_version_to_wire(status.weight_version),
                "in_flight": status.in_flight,
                "pause_mode": status.pause_mode,
                "asleep": sorted(status.asleep),
                "weights_loaded": status.weights_loaded,
            }
        )
