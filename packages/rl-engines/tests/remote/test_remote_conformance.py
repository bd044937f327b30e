"""RemoteEngine passes the conformance suite against our server started as a real process on 127.0.0.1.

The lifecycle checks throttle generation from the `on_tokens` callback, which cannot slow a remote engine
(tokens arrive after the server made them), so the suite runs without the "stream" capability and watches
`status()` instead; streaming itself is checked in tests/server/test_http.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import pytest
from _rollout_server import ServerProcess

from rl_engines.remote import RemoteEngine, RemoteEngineConfig
from rl_engines.rollout import InferenceEngine
from rl_engines.testing import ConformanceModels, InferenceEngineConformance

_servers: list[ServerProcess] = []


@pytest.fixture(scope="module", autouse=True)
def kill_servers_at_end() -> Iterator[None]:
    """The servers this module started are killed when it ends, whatever happened."""
    yield
    while _servers:
        _servers.pop().stop()


@pytest.mark.slow
class TestRemoteEngineConformance(InferenceEngineConformance):
    timeout_s: ClassVar[float] = 60.0

    def make_engine(self, models: ConformanceModels) -> InferenceEngine:
        server = ServerProcess(str(models.v1_dir), "--prefill-cache-size", "4", "--timeout-s", "30")
        _servers.append(server)
        probe = RemoteEngine(RemoteEngineConfig(server.url))
        # The served HFEngine bounds its calls in its own process; the client's calls cross HTTP.
        assert "bounded_calls" not in probe.capabilities
        capabilities = probe.capabilities - {"stream"}
        probe.shutdown()
        return RemoteEngine(RemoteEngineConfig(server.url, timeout_s=60.0, capabilities=capabilities))
