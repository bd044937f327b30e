"""Errors of the HTTP protocol and how typed engine errors travel over it (both directions).

The server answers an engine error with an HTTP status and a body naming the error class; the client turns
that body back into the same class, so callers handle a remote engine exactly like a local one. Bodies
from a real SGLang server carry no class name; the client then maps by status code.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from rl_engines.rollout import (
    EngineAsleepError,
    EngineShutdownError,
    EngineStateError,
    EngineTimeoutError,
    InvalidRequestError,
    ParameterShapeError,
    PromptTooLongError,
    RolloutError,
    UnknownParameterError,
    UnversionedWeightsError,
    WeightsNotLoadedError,
    WeightUpdateError,
)


class RemoteError(RolloutError):
    """The HTTP exchange with a rollout server failed in a way no engine error describes."""


class ServerConnectionError(RemoteError, ConnectionError):
    """The server could not be reached (refused, reset, DNS); the message names the URL."""


class ProtocolError(RemoteError):
    """The server answered with a status or body outside the protocol; the message quotes it."""


class AuthenticationError(RemoteError, PermissionError):
    """The server refused the call for a missing or wrong API key (HTTP 401/403): set `RemoteEngineConfig.api_key`
    to the key the server was started with."""


class PayloadTooLargeError(InvalidRequestError):
    """A request body exceeded the server's size limit (HTTP 413); raise the limit or send smaller buckets."""


_TRANSPORTED: tuple[type[RolloutError], ...] = (
    PayloadTooLargeError,
    PromptTooLongError,
    UnknownParameterError,
    ParameterShapeError,
    WeightUpdateError,
    InvalidRequestError,
    EngineAsleepError,
    WeightsNotLoadedError,
    UnversionedWeightsError,
    EngineShutdownError,
    EngineStateError,
    EngineTimeoutError,
    RolloutError,
)
"""Error classes that keep their identity across the wire, most specific first."""
ERROR_TYPES: dict[str, type[RolloutError]] = {cls.__name__: cls for cls in _TRANSPORTED}

_STATUS_OF: tuple[tuple[type[BaseException], HTTPStatus], ...] = (
    (PayloadTooLargeError, HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
    (InvalidRequestError, HTTPStatus.BAD_REQUEST),
    (WeightUpdateError, HTTPStatus.BAD_REQUEST),
    # The engine cannot serve now but will after a wake-up, an update or a version: "try again later".
    (EngineAsleepError, HTTPStatus.SERVICE_UNAVAILABLE),
    (WeightsNotLoadedError, HTTPStatus.SERVICE_UNAVAILABLE),
    (UnversionedWeightsError, HTTPStatus.SERVICE_UNAVAILABLE),
    (EngineShutdownError, HTTPStatus.SERVICE_UNAVAILABLE),
    (EngineStateError, HTTPStatus.CONFLICT),
    (EngineTimeoutError, HTTPStatus.GATEWAY_TIMEOUT),
)


def status_for(error: BaseException) -> HTTPStatus:
    """The HTTP status the server answers `error` with (500 for anything unexpected)."""
    for cls, status in _STATUS_OF:
        if isinstance(error, cls):
            return status
    return HTTPStatus.INTERNAL_SERVER_ERROR


def _fallback_class(status: int, weights: bool) -> type[RolloutError]:
    if status in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN):
        return AuthenticationError
    if status == HTTPStatus.REQUEST_ENTITY_TOO_LARGE:
        return PayloadTooLargeError
    if status in (HTTPStatus.BAD_REQUEST, HTTPStatus.UNPROCESSABLE_ENTITY):
        return WeightUpdateError if weights else InvalidRequestError
    if status in (HTTPStatus.SERVICE_UNAVAILABLE, HTTPStatus.CONFLICT, HTTPStatus.NOT_FOUND):
        return EngineStateError
    if status in (HTTPStatus.GATEWAY_TIMEOUT, HTTPStatus.REQUEST_TIMEOUT):
        return EngineTimeoutError
    return RemoteError


def _message_and_type(body: Any) -> tuple[str | None, str | None]:
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            return _text(error.get("message")), _text(error.get("type"))
        if isinstance(error, str):
            detail = body.get("message")
            return (f"{error}: {detail}" if isinstance(detail, str) else error), None
        message = body.get("message", body.get("detail"))
        return _text(message), _text(body.get("error_type"))
    if isinstance(body, str) and body.strip():
        return body.strip(), None
    return None, None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def error_from_response(status: int, body: Any, what: str, *, weights: bool = False) -> RolloutError:
    """The typed error for a non-2xx answer to `what`; `weights` picks `WeightUpdateError` for a bare 400."""
    message, type_name = _message_and_type(body)
    cls = ERROR_TYPES.get(type_name or "") or _fallback_class(status, weights)
    detail = message or f"HTTP {status} with no message"
    if cls is AuthenticationError:
        detail += "; set RemoteEngineConfig.api_key to the server's --api-key"
    return cls(f"{what}: {detail} (HTTP {status})")
