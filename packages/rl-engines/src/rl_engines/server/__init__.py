"""Our rollout server: any `InferenceEngine` (`HFEngine` by default) behind SGLang's native HTTP protocol.

`python -m rl_engines.server --model <checkpoint dir | config.json> --port N` serves on 127.0.0.1; in code,
`create_app(engine, ServerConfig(...))` gives the FastAPI app and `serve(engine, config)` runs it.
`rl_engines.remote.RemoteEngine` is its client. fastapi and uvicorn come with `rl-engines[server]`.
With a tokenizer it also answers OpenAI's `/v1/chat/completions` and `/v1/completions` and records every completion's
tokens, log-probs and policy versions (`CompletionStore`); `create_openai_app(OpenAIService(...))` is the same
endpoint over any `OpenAIBackend` (the `openai_agent` workflow serves an episode's engine through it). `stream: true`
streams as tokens are decoded when the backend reports them (`streams_tokens`, `ChoiceTokens`).
"""

from rl_engines.server._app import create_app
from rl_engines.server._config import DEFAULT_HOST, DEFAULT_MAX_REQUEST_BYTES, ServerConfig
from rl_engines.server._model import build_hf_engine
from rl_engines.server._openai_service import ChoiceTokens, OpenAIBackend, OpenAIService
from rl_engines.server._openai_store import CompletionRecord, CompletionStore
from rl_engines.server._openai_types import OpenAIError
from rl_engines.server._routes_openai import create_openai_app
from rl_engines.server._run import serve

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_MAX_REQUEST_BYTES",
    "ChoiceTokens",
    "CompletionRecord",
    "CompletionStore",
    "OpenAIBackend",
    "OpenAIError",
    "OpenAIService",
    "ServerConfig",
    "build_hf_engine",
    "create_app",
    "create_openai_app",
    "serve",
]
