"""Reading request bodies: a size limit (413), JSON that must parse (400), and fields checked by name."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from typing import Any

from rl_core import nearest_name
from rl_engines.remote import PayloadTooLargeError
from rl_engines.rollout import InvalidRequestError

_PARSE_INLINE_BYTES = 64 * 1024
"""Bodies below this are parsed on the event loop (a thread hop costs more than parsing them)."""


async def read_json(request: Any, limit: int) -> dict[str, Any]:
    """The JSON object in `request`'s body (`{}` when empty).

    Raises `PayloadTooLargeError` past `limit` bytes (checked on the declared length and while reading, so a
    lying or chunked client is cut off too) and `InvalidRequestError` for malformed JSON or a non-object.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLargeError(
            f"the request body is {int(declared)} bytes, over this server's limit of {limit} bytes; "
            "send smaller batches or start the server with a larger --max-request-bytes"
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLargeError(
                f"the request body exceeds this server's limit of {limit} bytes; "
                "send smaller batches or start the server with a larger --max-request-bytes"
            )
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    try:
        # Off the event loop above a small size: parsing tens of MB would stall every other route (/health too).
        body = json.loads(raw) if size < _PARSE_INLINE_BYTES else await asyncio.to_thread(json.loads, raw)
    except (UnicodeDecodeError, ValueError) as error:
        raise InvalidRequestError(f"malformed JSON body: {error}") from None
    if not isinstance(body, dict):
        raise InvalidRequestError(f"the JSON body must be an object, got {type(body).__name__}")
    return body


def check_fields(body: Mapping[str, Any], known: Iterable[str], where: str) -> None:
    """Reject fields outside `known`, suggesting the nearest known name."""
    allowed = sorted(known)
    for key in body:
        if key not in allowed:
            hint = nearest_name(key, allowed)
            suggestion = f"; did you mean {hint!r}?" if hint else f"; known fields: {allowed}"
            raise InvalidRequestError(f"{where}: unknown field {key!r}{suggestion}")


def field(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...], where: str, default: Any = None) -> Any:
    """`body[name]` checked against `kind` (None or absent gives `default`; bools are not ints)."""
    value = body.get(name)
    if value is None:
        return default
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise InvalidRequestError(f"{where}: {name} must be {_names(kinds)}, got {value!r}")
    if not isinstance(value, kinds):
        raise InvalidRequestError(f"{where}: {name} must be {_names(kinds)}, got {value!r}")
    return value


def required(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    """Like `field`, but a missing or null value is an error."""
    value = field(body, name, kind, where)
    if value is None:
        raise InvalidRequestError(f"{where}: {name} is required")
    return value


def _names(kinds: tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in kinds)
