"""A thin httpx wrapper: JSON calls and SSE streams with a timeout each, failures as typed engine errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from rl_engines.remote._config import RemoteEngineConfig
from rl_engines.remote._errors import ProtocolError, ServerConnectionError, error_from_response
from rl_engines.rollout import EngineTimeoutError

SSE_DATA = "data:"
SSE_DONE = "[DONE]"


def import_httpx() -> Any:
    """The httpx module, or an ImportError naming the extra that provides it."""
    try:
        import httpx
    except ImportError as error:  # pragma: no cover - exercised only without the extra
        raise ImportError("RemoteEngine needs httpx: pip install 'rl-engines[server]'") from error
    return httpx


def _body(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


class HttpClient:
    """JSON over HTTP to one server; every call has a timeout and raises `RolloutError` subclasses."""

    def __init__(self, config: RemoteEngineConfig) -> None:
        self._httpx = import_httpx()
        self.config = config
        limits = self._httpx.Limits(max_connections=config.max_connections, max_keepalive_connections=32)
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key is not None else None
        self._client = self._httpx.Client(base_url=config.base_url, limits=limits, trust_env=False, headers=headers)

    def _timeout(self, seconds: float) -> Any:
        return self._httpx.Timeout(seconds, connect=self.config.connect_timeout_s)

    def request(
        self, method: str, path: str, body: Any = None, *, timeout_s: float, weights: bool = False
    ) -> tuple[int, Any]:
        """`(status, parsed body)` of a 2xx answer; raises the typed error of any other answer."""
        what = f"{method} {path}"
        try:
            response = self._client.request(method, path, json=body, timeout=self._timeout(timeout_s))
        except self._httpx.TimeoutException as error:
            raise EngineTimeoutError(f"{what}: no answer from {self.config.base_url} in {timeout_s} s") from error
        except self._httpx.TransportError as error:
            raise ServerConnectionError(f"{what}: cannot reach {self.config.base_url}: {error}") from error
        payload = _body(response)
        if not response.is_success:
            raise error_from_response(response.status_code, payload, what, weights=weights)
        return response.status_code, payload

    def post(self, path: str, body: Any = None, *, timeout_s: float, weights: bool = False) -> Any:
        """The parsed body of a successful POST."""
        return self.request("POST", path, {} if body is None else body, timeout_s=timeout_s, weights=weights)[1]

    def get(self, path: str, *, timeout_s: float) -> Any:
        """The parsed body of a successful GET."""
        return self.request("GET", path, timeout_s=timeout_s)[1]

    def stream(self, path: str, body: Any, *, timeout_s: float) -> Iterator[dict[str, Any]]:
        """The JSON events of a server-sent-event POST, until `[DONE]`; an `{"error"}` event raises."""
        what = f"POST {path} (stream)"
        try:
            with self._client.stream("POST", path, json=body, timeout=self._timeout(timeout_s)) as response:
                if not response.is_success:
                    response.read()
                    raise error_from_response(response.status_code, _body(response), what)
                for line in response.iter_lines():
                    if not line.startswith(SSE_DATA):
                        continue
                    data = line[len(SSE_DATA) :].strip()
                    if data == SSE_DONE:
                        return
                    try:
                        event = json.loads(data)
                    except ValueError as error:
                        raise ProtocolError(f"{what}: malformed event {data[:200]!r}") from error
                    if isinstance(event, dict) and "error" in event:
                        raise error_from_response(500, event, what)
                    yield event
        except self._httpx.TimeoutException as error:
            raise EngineTimeoutError(f"{what} stalled for over {timeout_s} s at {self.config.base_url}") from error
        except self._httpx.TransportError as error:
            raise ServerConnectionError(f"{what}: connection to {self.config.base_url} failed: {error}") from error
        raise ProtocolError(f"{what}: the stream ended without data: [DONE]")

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()
