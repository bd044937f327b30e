"""`/begin_weight_update` and `/end_weight_update`: a session around several weight-update calls.

Between the two, generation waits with its requests kept (not aborted), so no request decodes with only some of
the new buckets loaded; the end resumes it if the beginning paused it.
"""

from __future__ import annotations

from typing import Any

from rl_engines.rollout import EngineStateError
from rl_engines.server._body import check_fields, read_json
from rl_engines.server._fastapi import FastAPI, JSONResponse, Request
from rl_engines.server._state import ServerState


def register_session_routes(app: FastAPI, state: ServerState) -> None:
    """Add the weight-update session routes to `app`."""
    engine = state.engine

    async def body_of(request: Request, known: tuple[str, ...], where: str) -> dict[str, Any]:
        body = await read_json(request, state.config.max_request_bytes)
        check_fields(body, known, where)
        return body

    @app.post("/begin_weight_update")
    async def begin_weight_update(request: Request) -> Any:
        await body_of(request, ("selector",), "begin_weight_update")
        if state.update_session:
            raise EngineStateError("begin_weight_update: a weight-update session is already open; end it first")
        paused = engine.status().state == "serving"
        if paused:
            await state.control(engine.pause, "keep")
        state.update_session = True
        state.session_paused = paused
        return JSONResponse({"success": True, "message": "Weight update session started."})

    @app.post("/end_weight_update")
    async def end_weight_update(request: Request) -> Any:
        await body_of(request, ("selector", "run_post_load"), "end_weight_update")
        if not state.update_session:
            raise EngineStateError("end_weight_update: no weight-update session is open; call /begin_weight_update")
        if state.session_paused:
            await state.control(engine.resume)
        state.update_session = False
        state.session_paused = False
        return JSONResponse({"success": True, "message": "Weight update session ended."})
