"""A rollout fleet's servers failing at the worst moment, with real server processes on 127.0.0.1: a server that
hangs (SIGSTOP) or dies (SIGKILL) during a weight update is dropped from it while the others complete theirs, stays
out of generation until a later update reaches it, and when none completes an update the error names each address;
a generate request in flight on a server that dies is retried on another. Every fault is timed by an event (the
update call reaching that server, the request parked on it), never by a sleep."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2Config

from rl_engines.remote import (
    FleetWeightSync,
    LocalServer,
    RemoteEngine,
    RemoteEngineConfig,
    ServerConnectionError,
    ServerFleet,
)
from rl_engines.rollout import GenerateRequest, InferenceEngine, SamplingParams
from rl_engines.sync import ReferenceTransport, WeightSync, WeightSyncConfig, as_buckets

pytestmark = pytest.mark.slow

_BUCKET_BYTES = 8192
"""Small buckets, so an update is several calls and a fault can land after the first."""
_HANG_TIMEOUT_S = 2.0
"""The hung server's call timeouts: how long the test waits for each of its two calls that hang."""
_TIMEOUT_S = 60.0
"""Every other client's: a loaded machine never trips it."""


@pytest.fixture(scope="module")
def servers(start_servers: Callable[[int], list[LocalServer]]) -> list[LocalServer]:
    """Three servers of the same model (each test kills or stops some: see their order)."""
    return start_servers(3)


def _client(server: LocalServer, timeout_s: float = _TIMEOUT_S) -> RemoteEngine:
    return RemoteEngine(RemoteEngineConfig(server.url, timeout_s=timeout_s, update_timeout_s=timeout_s))


def _make_sync(server: InferenceEngine, _index: int) -> WeightSync:
    return WeightSync([server], ReferenceTransport(), WeightSyncConfig(pause_mode="wait", dtype="float32"))


def _weights(hf_config: Qwen2Config, seed: int) -> list[tuple[str, torch.Tensor]]:
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(hf_config)
    return [(name, param.detach().clone()) for name, param in model.named_parameters()]


def _buckets(hf_config: Qwen2Config, seed: int) -> list[list[tuple[str, torch.Tensor]]]:
    buckets = list(as_buckets(_weights(hf_config, seed), _BUCKET_BYTES))
    assert len(buckets) >= 3
    return buckets


def _on_update_call(
    member: RemoteEngine, call: int, fault: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run `fault` when `member`'s update call number `call` of an update starts, then make the call."""
    original = member.update_weights_from_tensors
    calls = {"n": 0}

    def faulty(tensors: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == call:
            fault()
        return original(tensors)

    monkeypatch.setattr(member, "update_weights_from_tensors", faulty)


def _kill(server: LocalServer) -> None:
    server.process.kill()
    server.process.wait()


def test_a_server_that_hangs_mid_update_is_dropped_and_rejoins_after_a_later_update(
    servers: list[LocalServer], hf_config: Qwen2Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    live, hung = servers[0], servers[1]
    fleet = ServerFleet([_client(live), _client(hung, _HANG_TIMEOUT_S)], health_interval_s=0.1)
    sync = FleetWeightSync(fleet, _make_sync)
    # its second bucket finds it stopped: the call passes update_timeout_s (then its resume call timeout_s), while
    # the live server completes the update
    _on_update_call(fleet.members[1], 2, lambda: os.kill(hung.process.pid, signal.SIGSTOP), monkeypatch)
    report = sync.sync(_buckets(hf_config, 1), 1)
    assert report.skipped == (hung.url,) and report.checksum is not None
    assert fleet.members[0].weight_version() == 1 and fleet.down == [hung.url]
    os.kill(hung.process.pid, signal.SIGCONT)
    assert fleet.members[1].health()  # it answers again, but holds no verified weights: still out of generation
    outputs = fleet.generate([GenerateRequest(f"r{i}", (5, 6, 7), SamplingParams(max_new_tokens=2)) for i in range(4)])
    assert len(outputs) == 4 and fleet.down == [hung.url]
    # A later update reaches it: back in generation, verified like the other. The same weights as version 1, so the
    # bucket it was sent while stopped (which it may still load now that it runs again) holds what this one sends.
    report = sync.sync(_buckets(hf_config, 1), 2)
    assert report.skipped == () and fleet.down == []
    assert fleet.weight_version() == 2
    assert fleet.members[0].weights_checksum() == fleet.members[1].weights_checksum()
    sync.close()
    fleet.shutdown()


def test_a_request_in_flight_on_a_server_that_dies_is_retried_on_another(servers: list[LocalServer]) -> None:
    doomed, live = servers[1], servers[0]
    fleet = ServerFleet([_client(doomed), _client(live)], health_interval_s=60.0)
    watch = _client(doomed)
    request = GenerateRequest("long", (5, 6, 7), SamplingParams(max_new_tokens=48, temperature=0.0))
    for _ in range(20):  # until the request is caught parked on the doomed server (it may finish before)
        fleet._next = 0  # deal it to the doomed server
        future = fleet.submit(request)
        while watch.status().in_flight == 0 and not future.done():
            pass
        watch.pause("keep")  # parks an admitted request: it cannot finish there any more
        if watch.status().in_flight == 1:
            break
        watch.resume()
        future.result(timeout=60)
    else:
        pytest.fail("the request never stayed in flight on the doomed server")
    _kill(doomed)
    output = future.result(timeout=60)  # its connection broke: the fleet sent it to the other server
    assert output.rid == "long" and len(output.output_ids) == 48
    assert fleet.down == [doomed.url]
    watch.shutdown()
    fleet.shutdown()


def test_a_streamed_request_whose_server_dies_after_tokens_is_not_streamed_twice(
    servers: list[LocalServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = ServerFleet([_client(servers[0]), _client(servers[2])], health_interval_s=60.0)
    first = fleet.members[0]

    def dies_after_a_token(requests: list[GenerateRequest], *, on_tokens: Any = None) -> Any:
        on_tokens([(requests[0].rid, 5, -1.0)])
        raise ServerConnectionError(f"POST /generate (stream): connection to {first.config.base_url} failed")

    monkeypatch.setattr(first, "generate", dies_after_a_token)
    streamed: list[Any] = []
    request = GenerateRequest("s", (5, 6, 7), SamplingParams(max_new_tokens=2))
    with pytest.raises(ServerConnectionError, match="after streaming 1 tokens; the request is not retried"):
        fleet.submit(request, on_tokens=streamed.extend).result(timeout=60)
    assert streamed == [("s", 5, -1.0)] and fleet.down == [servers[0].url]
    fleet.shutdown()


def test_a_server_killed_mid_update_is_skipped_and_an_update_that_reaches_none_names_each(
    servers: list[LocalServer], hf_config: Qwen2Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    live, doomed = servers[0], servers[2]
    fleet = ServerFleet([_client(live), _client(doomed)], health_interval_s=60.0)
    sync = FleetWeightSync(fleet, _make_sync)
    _on_update_call(fleet.members[1], 2, lambda: _kill(doomed), monkeypatch)
    report = sync.sync(_buckets(hf_config, 3), 1)
    assert report.skipped == (doomed.url,) and fleet.down == [doomed.url]
    assert fleet.weight_version() == 1  # the survivor's weights were verified by its own sync
    _on_update_call(fleet.members[0], 2, lambda: _kill(live), monkeypatch)
    with pytest.raises(ServerConnectionError, match="reached no rollout server") as caught:
        sync.sync(_buckets(hf_config, 4), 2)
    assert live.url in str(caught.value) and doomed.url in str(caught.value)
    sync.close()
    fleet.shutdown()
