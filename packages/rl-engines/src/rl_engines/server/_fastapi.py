"""The web framework, imported in one place so that a missing `[server]` extra gives one clear error."""

from __future__ import annotations

try:
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError("the rollout server needs fastapi and uvicorn: pip install 'rl-engines[server]'") from error

__all__ = ["FastAPI", "JSONResponse", "PlainTextResponse", "Request", "Response", "StreamingResponse"]
