"""Control routes: pause / continue, abort, release / resume memory, flush cache, model info and status."""

from __future__ import annotations

import importlib.metadata
from typing import Any

from rl_engines.rollout import SLEEP_TAGS, InvalidRequestError
from rl_engines.server._body import check_fields, field, read_json
from rl_engines.server._fastapi import FastAPI, JSONResponse, PlainTextResponse, Request, Response
from rl_engines.server._state import ServerState

_PAUSE_MODES = {"abort": "abort", "in_place": "keep", "retract": "keep", "keep": "keep", "wait": "wait"}
"""SGLang's pause modes and ours. "retract" (recompute parked requests later) is served as "keep" (they keep
their KV cache); "wait" (drain in-flight requests) is our addition."""
_SLEEP_LEVELS = (1, 2)


def _package_version() -> str:
    try:
        return importlib.metadata.version("rl-engines")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "unknown"


def _tags(body: dict[str, Any], where: str) -> list[str] | None:
    tags = field(body, "tags", list, where)
    if tags is not None and (not tags or not set(tags) <= set(SLEEP_TAGS)):
        raise InvalidRequestError(f"{where}: tags must be a non-empty subset of {list(SLEEP_TAGS)}, got {tags!r}")
    return tags


def register_control_routes(app: FastAPI, state: ServerState) -> None:
    """Add the control routes to `app`."""
    limit = state.config.max_request_bytes
    engine = state.engine

    async def body_of(request: Request, known: tuple[str, ...], where: str) -> dict[str, Any]:
        body = await read_json(request, limit)
        check_fields(body, known, where)
        return body

    @app.post("/pause_generation")
    async def pause_generation(request: Request) -> Any:
        body = await body_of(request, ("mode", "timeout_s"), "pause_generation")
        mode = field(body, "mode", str, "pause_generation", "abort")
        if mode not in _PAUSE_MODES:
            raise InvalidRequestError(f"pause_generation: mode must be one of {sorted(_PAUSE_MODES)}, got {mode!r}")
        timeout_s = field(body, "timeout_s", (int, float), "pause_generation")
        await state.control(engine.pause, _PAUSE_MODES[mode], timeout_s=timeout_s)
        return JSONResponse({"message": "Generation paused successfully.", "status": "ok"})

    @app.post("/continue_generation")
    async def continue_generation(request: Request) -> Any:
        await body_of(request, (), "continue_generation")
        await state.control(engine.resume)
        return JSONResponse({"message": "Generation continued successfully.", "status": "ok"})

    @app.post("/abort_request")
    async def abort_request(request: Request) -> Any:
        body = await body_of(request, ("rid", "abort_all", "finished_reason", "aborted_message"), "abort_request")
        if field(body, "abort_all", bool, "abort_request", False):
            await state.control(engine.abort, None)
        else:
            rid = field(body, "rid", str, "abort_request", "")
            if rid:
                await state.control(engine.abort, [rid])
        return Response(status_code=200)

    @app.api_route("/release_memory_occupation", methods=["GET", "POST"])
    async def release_memory_occupation(request: Request) -> Any:
        where = "release_memory_occupation"
        body = await body_of(request, ("tags", "level"), where)
        tags = _tags(body, where)
        if tags is not None and set(tags) != set(SLEEP_TAGS):
            raise InvalidRequestError(
                f"{where}: this engine releases weights and KV cache together; send tags {list(SLEEP_TAGS)} or null"
            )
        level = field(body, "level", int, where, 1)
        if level not in _SLEEP_LEVELS:
            raise InvalidRequestError(f"{where}: level must be 1 (offload weights) or 2 (discard them), got {level}")
        await state.control(engine.sleep, level)
        return JSONResponse(None)  # SGLang answers a JSON null; its adapters decode the body

    @app.api_route("/resume_memory_occupation", methods=["GET", "POST"])
    async def resume_memory_occupation(request: Request) -> Any:
        where = "resume_memory_occupation"
        body = await body_of(request, ("tags",), where)
        await state.control(engine.wake_up, _tags(body, where))
        return JSONResponse(None)

    @app.api_route("/flush_cache", methods=["GET", "POST"])
    async def flush_cache(request: Request) -> Any:
        # Unlike SGLang this never answers 400 while requests run: HFEngine's prompt cache is safe to clear
        # at any time (each in-flight request holds its own copy).
        await body_of(request, (), "flush_cache")
        await state.control(engine.flush_cache)
        return PlainTextResponse("Cache flushed.\n")
