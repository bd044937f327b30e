"""Running the app under uvicorn, blocking until it is stopped."""

from __future__ import annotations

import logging
from typing import Any

from rl_engines.rollout import InferenceEngine
from rl_engines.server._app import create_app
from rl_engines.server._auth import warn_if_exposed
from rl_engines.server._config import ServerConfig

logger = logging.getLogger(__name__)


def serve(engine: InferenceEngine, config: ServerConfig, *, tokenizer: Any | None = None) -> None:
    """Serve `engine` on `config.host:config.port` until interrupted (SIGINT / SIGTERM); then shut it down.

    `tokenizer` enables the OpenAI routes (see `create_app`)."""
    try:
        import uvicorn
    except ImportError as error:  # pragma: no cover - exercised only without the extra
        raise ImportError("the rollout server needs uvicorn: pip install 'rl-engines[server]'") from error
    warn_if_exposed(config.host, config.api_key)
    app = create_app(engine, config, tokenizer=tokenizer)
    logger.info("serving on http://%s:%d", config.host, config.port)
    # log_config=None: logging handlers are configured only by the command-line entry point.
    uvicorn.run(app, host=config.host, port=config.port, log_config=None, access_log=False, timeout_keep_alive=30)
