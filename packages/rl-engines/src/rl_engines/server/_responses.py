"""Response bodies in SGLang's shapes, with the engine error's class name added so clients can re-raise it."""

from __future__ import annotations

import logging
from typing import Any

from rl_engines.remote import status_for
from rl_engines.server._fastapi import JSONResponse

logger = logging.getLogger(__name__)


def error_response(error: BaseException, *, weights: bool = False) -> Any:
    """`{"error": {"message", "type", "code"}}`, or `{"success": false, "message", "error_type"}` for weights."""
    status = int(status_for(error))
    if status >= 500:
        logger.error("request failed with HTTP %d: %r", status, error, exc_info=error)
    message, kind = str(error), type(error).__name__
    if weights:
        return JSONResponse({"success": False, "message": message, "error_type": kind}, status_code=status)
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def success(message: str, **extra: Any) -> Any:
    """SGLang's weight-update success body."""
    return JSONResponse({"success": True, "message": message, **extra})
