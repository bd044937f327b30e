"""`create_app`: a FastAPI app serving an `InferenceEngine` with SGLang's native HTTP protocol (a subset).

Endpoints: `/generate` (JSON or SSE; `text` prompts and answers too with a tokenizer), `/health`, `/health_generate`,
`/flush_cache`, `/update_weights_from_disk`, `/update_weights_from_tensor`, `/init_weights_update_group`,
`/update_weights_from_distributed`, `/destroy_weights_update_group`, `/release_memory_occupation`,
`/resume_memory_occupation`, `/pause_generation`, `/continue_generation`, `/abort_request`,
`/update_weight_version`, `/get_weight_version`, `/model_info` (`/get_model_info`), `/server_info`
(`/get_server_info`), `/v1/models`, `/begin_weight_update`, `/end_weight_update`; our additions:
`/weights_checksum` and `/engine_status`; OpenAI's `/v1/chat/completions` and `/v1/completions` (with a tokenizer)
plus `/v1/rl/completions/{id}`, the tokens recorded for training (`_routes_openai`). Bad input answers 4xx with a
message naming the field (413 past the size limit), a state error 409 or 503 (e.g. generate while asleep), and the
engine keeps serving. With `ServerConfig.api_key` set, every route but `/health` answers 401 without
`Authorization: Bearer <key>`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from rl_engines.rollout import InferenceEngine, RolloutError
from rl_engines.server._auth import ApiKeyMiddleware
from rl_engines.server._config import ServerConfig
from rl_engines.server._fastapi import FastAPI, Request
from rl_engines.server._responses import error_response
from rl_engines.server._routes_control import register_control_routes
from rl_engines.server._routes_generate import register_generate_routes
from rl_engines.server._routes_info import register_info_routes
from rl_engines.server._routes_openai import register_openai_routes
from rl_engines.server._routes_session import register_session_routes
from rl_engines.server._routes_weights import register_weight_routes
from rl_engines.server._state import ServerState

logger = logging.getLogger(__name__)


def create_app(
    engine: InferenceEngine,
    config: ServerConfig | None = None,
    *,
    owns_engine: bool = True,
    tokenizer: Any | None = None,
) -> Any:
    """The FastAPI app serving `engine`; with `owns_engine` the engine is shut down when the app stops.

    `tokenizer` (the served model's, a transformers tokenizer) enables the OpenAI routes and `text` on `/generate`
    (prompts, answers, stop strings); without it those answer 501 naming `--tokenizer`."""
    state = ServerState(engine, config or ServerConfig())

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        yield
        if owns_engine:
            state.close()

    app = FastAPI(title="rl-engines rollout server", lifespan=lifespan, openapi_url=None)
    app.state.rollout = state

    # Engine errors are answers, not crashes: a handler for `Exception` would run in Starlette's outermost
    # middleware, which re-raises after answering and drops the connection.
    @app.exception_handler(RolloutError)
    async def handle_error(_: Request, error: RolloutError) -> Any:
        return error_response(error)

    register_generate_routes(app, state, tokenizer)
    register_weight_routes(app, state)
    register_control_routes(app, state)
    register_info_routes(app, state)
    register_session_routes(app, state)
    register_openai_routes(app, state, tokenizer)
    if state.config.api_key is not None:
        app.add_middleware(ApiKeyMiddleware, api_key=state.config.api_key)
    return app
