"""Who may drive the server: an optional API key checked on every request, and the bind-address rule.

The key is SGLang's `--api-key` contract: clients send `Authorization: Bearer <key>`; a missing or wrong key is
answered 401 before any route runs. Only `GET /health` is open (a liveness probe that computes nothing and reveals
nothing, as SGLang leaves it open for load balancers); `/health_generate` runs the model, so it needs the key.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from rl_engines.remote import API_KEY_ENV

logger = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/health"})
"""Routes answered without a key: liveness only."""
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind_problem(host: str, api_key: str | None, allow_unauthenticated: bool) -> str | None:
    """Why the server must not start on `host` with these settings, or None when it may."""
    if api_key is not None or is_loopback(host) or allow_unauthenticated:
        return None
    return (
        f"refusing to serve on {host!r} without an API key: off the loopback interface anyone who reaches the "
        f"address could replace the weights; pass --api-key KEY (or set {API_KEY_ENV}), bind 127.0.0.1, or pass "
        "--allow-unauthenticated to accept the risk explicitly"
    )


def warn_if_exposed(host: str, api_key: str | None) -> None:
    """Log a warning when the server is about to listen off the loopback interface without a key."""
    if api_key is None and not is_loopback(host):
        logger.warning(
            "serving on %s without an API key: anyone who reaches this address can replace the weights, release "
            "memory and run generations; pass --api-key (or set %s) to require one",
            host,
            API_KEY_ENV,
        )


def _authorized(headers: list[tuple[bytes, bytes]], expected: bytes) -> bool:
    for name, value in headers:
        if name.lower() == b"authorization":
            # Constant-time: the time taken must not reveal how much of a guessed key was right.
            return hmac.compare_digest(value, expected)
    return False


class ApiKeyMiddleware:
    """Pure ASGI middleware answering 401 unless the request carries `Authorization: Bearer <key>`.

    Pure ASGI rather than Starlette's `BaseHTTPMiddleware`, so a route still sees its client disconnect."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        if not api_key:
            raise ValueError("the API key must be a non-empty string")
        self.app = app
        self._expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or scope.get("method") == "OPTIONS":
            await self.app(scope, receive, send)
            return
        if _authorized(scope.get("headers", []), self._expected):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            {
                "error": "Unauthorized",
                "message": "missing or wrong API key: send the header 'Authorization: Bearer <key>' with the key "
                "the server was started with",
            }
        ).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body})
