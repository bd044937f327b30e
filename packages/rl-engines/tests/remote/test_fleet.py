"""The "server" rollout engine: a `ServerFleet` over rollout servers started by the builder or already running,
requests dealt over the servers, an unreachable one retried elsewhere, a dead address an error naming it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from transformers import Qwen2Config

from rl_engines.remote import (
    LocalServer,
    RemoteEngine,
    RemoteEngineConfig,
    ServerConnectionError,
    ServerEngineConfig,
    ServerFleet,
)
from rl_engines.rollout import (
    ENGINE_EXTRAS,
    GenerateRequest,
    RolloutEngineSpec,
    SamplingParams,
    build_rollout_engine,
    missing_engine_extra,
)
from rl_engines.sync import free_port

pytestmark = pytest.mark.slow

_FAST = {"connect_attempts": 2, "retry_backoff_s": 0.1, "health_interval_s": 0.1, "timeout_s": 60.0}


def _requests(count: int) -> list[GenerateRequest]:
    sampling = SamplingParams(max_new_tokens=3, temperature=0.0)
    return [GenerateRequest(f"r{index}", [5, 6, 7 + index], sampling) for index in range(count)]


@pytest.fixture(scope="module")
def started(hf_config: Qwen2Config) -> Iterator[list[ServerFleet]]:
    """Two fleets of one server each, started by the builder (as two trainer workers would)."""
    spec = RolloutEngineSpec(hf_config, dtype="float32", device="cpu", seed=0, engine_kwargs=_FAST)
    fleets = []
    try:
        for _ in range(2):
            fleet = build_rollout_engine("server", spec)
            assert isinstance(fleet, ServerFleet)
            fleets.append(fleet)
        yield fleets
    finally:
        for fleet in fleets:
            fleet.shutdown()


def test_the_builder_starts_a_server_that_generates_and_stops_with_the_engine(started: list[ServerFleet]) -> None:
    fleet = started[0]
    assert fleet.health() and fleet.addresses[0].startswith("http://127.0.0.1:")
    assert {"tensor", "disk", "distributed"} <= fleet.capabilities
    outputs = fleet.generate(_requests(3))
    assert [output.rid for output in outputs] == ["r0", "r1", "r2"]
    assert all(len(output.output_ids) == 3 for output in outputs)
    assert fleet.weight_version() == 0


def test_requests_are_dealt_over_every_server(started: list[ServerFleet], monkeypatch: pytest.MonkeyPatch) -> None:
    members = [RemoteEngine(member.config) for fleet in started for member in fleet.members]
    fleet = ServerFleet(members, health_interval_s=0.1)
    served: dict[str, int] = {}
    for member in members:
        original = member.generate

        def counting(requests, *, on_tokens=None, _original=original, _url=member.config.base_url):
            served[_url] = served.get(_url, 0) + len(requests)
            return _original(requests, on_tokens=on_tokens)

        monkeypatch.setattr(member, "generate", counting)
    outputs = fleet.generate(_requests(6))
    assert [output.rid for output in outputs] == [f"r{index}" for index in range(6)]
    assert sorted(served.values()) == [3, 3]
    fleet.shutdown()  # the clients only: these servers belong to the started fleets


def test_an_unreachable_server_is_retried_on_the_others_and_skipped_by_weight_updates(
    started: list[ServerFleet], start_servers: Callable[[int], list[LocalServer]]
) -> None:
    (doomed,) = start_servers(1)
    members = [RemoteEngine(started[0].members[0].config), RemoteEngine(RemoteEngineConfig(doomed.url))]
    fleet = ServerFleet(members, health_interval_s=60.0)
    alone = ServerFleet([RemoteEngine(RemoteEngineConfig(doomed.url))])
    doomed.stop()
    # submit deals each request on its own: those dealt to the dead server are retried on the other one
    submitted = [fleet.submit(request).result(timeout=60) for request in _requests(2)]
    assert [output.rid for output in submitted] == ["r0", "r1"]
    fleet._health.down.clear()  # forget the dead server again, so generate meets it too
    outputs = fleet.generate(_requests(4))
    assert [output.rid for output in outputs] == ["r0", "r1", "r2", "r3"]
    assert fleet.generate(_requests(2))[0].rid == "r0"  # the dead server is skipped until it is probed again
    assert fleet.down == [doomed.url] and fleet.status().state  # control calls go to the live server
    # a weight update goes to the live server only; the dead one stays out of generation until an update reaches it
    assert fleet.weight_targets() == [0] and fleet._health.missed_update == {1}
    fleet.readmit([0])
    assert fleet.down == [doomed.url]
    with pytest.raises(ServerConnectionError, match=rf"no rollout server of the fleet answers .*{doomed.url}"):
        alone.weight_targets()
    fleet.shutdown()
    alone.shutdown()


def test_an_address_that_does_not_answer_is_named_after_the_retries(hf_config: Qwen2Config) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    spec = RolloutEngineSpec(hf_config, dtype="float32", device="cpu", engine_kwargs=_FAST, servers=(dead,))
    with pytest.raises(ServerConnectionError, match=rf"rollout server {dead} did not answer in 2 tries"):
        build_rollout_engine("server", spec)


def test_a_missing_extra_names_the_pip_install(monkeypatch: pytest.MonkeyPatch) -> None:
    assert missing_engine_extra("server") is None and missing_engine_extra("hf") is None
    monkeypatch.setitem(ENGINE_EXTRAS, "server", (("no_such_module_rl",), "pip install 'rl-engines[server]'"))
    message = missing_engine_extra("server")
    assert message is not None and "no_such_module_rl" in message and "pip install 'rl-engines[server]'" in message


def test_a_started_server_exits_when_the_process_that_started_it_dies(tmp_path: Path, hf_config: Qwen2Config) -> None:
    script = textwrap.dedent(
        f"""
        import os
        from transformers import Qwen2Config
        from rl_engines.remote import LocalServer
        server = LocalServer.start(Qwen2Config(**{hf_config.to_diff_dict()!r}))
        print(server.process.pid, flush=True)
        os._exit(0)  # no stop(): as a killed trainer worker
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    pid = int(done.stdout.split()[-1])
    deadline = time.monotonic() + 60
    while _alive(pid):
        assert time.monotonic() < deadline, f"the orphaned rollout server {pid} is still running"
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_fleet_sends_the_configured_key_or_the_environment_s(monkeypatch: pytest.MonkeyPatch) -> None:
    from rl_engines.remote import API_KEY_ENV
    from rl_engines.remote._build import _remote_config

    monkeypatch.delenv(API_KEY_ENV, raising=False)
    assert _remote_config(ServerEngineConfig(), "http://127.0.0.1:1").api_key is None
    assert _remote_config(ServerEngineConfig(api_key="k1"), "http://127.0.0.1:1").api_key == "k1"
    monkeypatch.setenv(API_KEY_ENV, "k2")  # servers started here inherit it, so the client must send it
    assert _remote_config(ServerEngineConfig(), "http://127.0.0.1:1").api_key == "k2"
    assert _remote_config(ServerEngineConfig(api_key="k1"), "http://127.0.0.1:1").api_key == "k1"
