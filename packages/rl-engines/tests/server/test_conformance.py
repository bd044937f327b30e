"""SGLang 0.5 shapes the real clients (verl, AReaL, sglang's adapters) depend on, and the robustness fixes.

Each test here failed against the server before issue 24's fixes: empty `image_data` refused, string booleans
truth-tested, `max_new_tokens` silently capped, empty bodies where SGLang answers JSON null, missing routes, a
numeric-string `master_port` refused, and a non-streaming request running on after its client left.
"""

from __future__ import annotations

import datetime
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
import torch
import torch.distributed as dist
from _rollout_server import ServerProcess
from _sglang_trainer import InBackground, broadcast_all, init_custom_process_group, init_request, update_request
from fastapi.testclient import TestClient

from rl_engines.rollout import HFEngineConfig, InvalidRequestError, WeightGroup, WeightGroupSpec, weights_checksum
from rl_engines.server import ServerConfig, build_hf_engine, create_app
from rl_engines.server._routes_weights import _port
from rl_engines.sync import free_port
from rl_engines.testing import ConformanceModels, TinyModelSpec, reference_greedy

TRAINER_TIMEOUT = datetime.timedelta(seconds=60)

PROMPT = [5, 17, 42, 9, 77]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> ConformanceModels:
    return ConformanceModels.create(tmp_path_factory.mktemp("conformance-models"))


@pytest.fixture(scope="module")
def client(models: ConformanceModels) -> Iterator[TestClient]:
    engine = build_hf_engine(str(models.v1_dir), HFEngineConfig(initial_version=1))
    with TestClient(create_app(engine, ServerConfig(model_path=str(models.v1_dir)))) as test_client:
        yield test_client


def body(prompt: list[int] = PROMPT, n: int = 4, **extra: object) -> dict:
    return {"input_ids": prompt, "sampling_params": {"max_new_tokens": n, "temperature": 0.0}, **extra}


def expect_serving(client: TestClient, models: ConformanceModels) -> None:
    response = client.post("/generate", json=body(sampling_params={"max_new_tokens": 4, "temperature": 0.0}))
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("media", [[], None, "batch"])
def test_empty_image_data_means_no_images(client: TestClient, models: ConformanceModels, media: object) -> None:
    if media == "batch":  # AReaL's batch form: one empty list per prompt
        request = {**body(), "input_ids": [PROMPT, PROMPT], "image_data": [[], []]}
    else:
        request = body(image_data=media)
    response = client.post("/generate", json=request)
    assert response.status_code == 200, response.text
    refused = client.post("/generate", json=body(image_data=["data:image/png;base64,AAAA"]))
    assert refused.status_code == 400 and "image_data" in refused.json()["error"]["message"]


@pytest.mark.parametrize(
    ("where", "request_body"),
    [
        ("stream", body(stream="false")),
        ("return_logprob", body(return_logprob="false")),
        ("ignore_eos", {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 2, "ignore_eos": "false"}}),
        ("stream", body(stream=0)),
    ],
)
def test_string_booleans_are_400_not_truthy(client: TestClient, where: str, request_body: dict) -> None:
    response = client.post("/generate", json=request_body)
    assert response.status_code == 400, response.text
    assert where in response.json()["error"]["message"] and "boolean" in response.json()["error"]["message"]


def test_max_new_tokens_past_the_context_is_400_naming_the_limit(client: TestClient) -> None:
    context = client.get("/model_info").json()["context_len"]
    response = client.post("/generate", json=body(n=10**9))
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert f"context length of {context}" in message and f"at most {context - len(PROMPT)}" in message
    exact = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": context - len(PROMPT), "temperature": 0.0}}
    assert client.post("/generate", json=exact).status_code == 200


def test_memory_routes_answer_json_null(client: TestClient, models: ConformanceModels) -> None:
    released = client.post("/release_memory_occupation", json={})
    assert released.status_code == 200 and released.content == b"null"
    resumed = client.post("/resume_memory_occupation", json={})
    assert resumed.status_code == 200 and resumed.content == b"null"
    expect_serving(client, models)


def test_info_routes(client: TestClient, models: ConformanceModels) -> None:
    listing = client.get("/v1/models").json()
    assert listing["object"] == "list" and listing["data"][0]["id"] == str(models.v1_dir)
    assert listing["data"][0]["max_model_len"] == client.get("/model_info").json()["context_len"]
    info = client.get("/server_info").json()
    assert client.get("/get_server_info").json() == info
    assert info["host"] == "127.0.0.1" and info["api_key_required"] is False and info["weight_version"] == "1"


def test_weight_update_session_holds_generation_until_it_ends(client: TestClient, models: ConformanceModels) -> None:
    assert client.post("/begin_weight_update", json={}).json()["success"] is True
    assert client.get("/engine_status").json()["state"] != "serving"
    assert client.post("/begin_weight_update", json={}).status_code == 409  # one session at a time
    payload = {"model_path": str(models.v1_dir), "weight_version": "1"}
    assert client.post("/update_weights_from_disk", json=payload).json()["success"] is True
    assert client.post("/end_weight_update", json={}).json()["success"] is True
    assert client.get("/engine_status").json()["state"] == "serving"
    assert client.post("/end_weight_update", json={}).status_code == 409
    expect_serving(client, models)


def test_master_port_takes_a_numeric_string_as_sglang_does() -> None:
    assert _port("29500", "init_weights_update_group") == 29500
    assert _port(29500, "init_weights_update_group") == 29500
    with pytest.raises(InvalidRequestError, match="master_port"):
        _port("port-9", "init_weights_update_group")


def _wait_until(condition: Callable[[], bool], what: str, limit_s: float = 300.0) -> None:
    """Poll `condition`; the limit only stops a broken server from hanging the suite (the verdict is the event)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"waited {limit_s} s for {what}"
        time.sleep(0.05)


def test_a_non_streaming_request_is_aborted_when_its_client_leaves(tmp_path_factory: pytest.TempPathFactory) -> None:
    # A model with room for a long answer; the request asks for all of it and is abandoned after it started.
    long = ConformanceModels.create(tmp_path_factory.mktemp("long-model"), TinyModelSpec(context_len=8192))
    server = ServerProcess(str(long.v1_dir), "--log-level", "INFO")
    try:
        request = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 8000, "ignore_eos": True}}
        raw = httpx.Request("POST", f"{server.url}/generate", json=request)
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            head = "POST /generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            sock.sendall(f"{head}Content-Length: {len(raw.content)}\r\n\r\n".encode() + raw.content)
            with httpx.Client(base_url=server.url, timeout=30.0) as probe:
                _wait_until(lambda: probe.get("/engine_status").json()["in_flight"] == 1, "the request to start")
        # The socket is closed: the server notices, aborts the request, and says so.
        with httpx.Client(base_url=server.url, timeout=30.0) as probe:
            _wait_until(lambda: probe.get("/engine_status").json()["in_flight"] == 0, "the abort")
            assert probe.post("/generate", json=body()).json()["output_ids"] == reference_greedy(long.v1, PROMPT, 4)[0]
        assert "client disconnected; aborting 1 requests" in server.log()
    finally:
        server.stop()


def test_rendezvous_with_dead_peers_never_block_control_calls(models: ConformanceModels) -> None:
    # Each init names a port nobody listens on; before, eight of them held every control thread for minutes.
    server = ServerProcess(str(models.v1_dir))
    try:
        group = {"master_address": "127.0.0.1", "rank_offset": 1, "world_size": 2, "backend": "gloo"}
        results: list[httpx.Response] = []

        def join(port: int) -> None:
            with httpx.Client(base_url=server.url, timeout=120.0) as http:
                body = {**group, "master_port": str(port), "group_name": f"g{port}", "timeout_s": 10}
                results.append(http.post("/init_weights_update_group", json=body))

        waiting = [threading.Thread(target=join, args=(free_port(),)) for _ in range(2)]
        for thread in waiting:
            thread.start()
        with httpx.Client(base_url=server.url, timeout=30.0) as http:
            waiting_now = lambda: http.get("/server_info").json()["weight_group_rendezvous_waiting"]  # noqa: E731
            _wait_until(lambda: waiting_now() == 2, "both rendezvous to be waiting")
            assert "2 rendezvous are already waiting" in _third_join(http, group)  # refused at once, not queued
            for _ in range(10):  # the control threads stay free meanwhile
                assert http.post("/flush_cache").status_code == 200
                assert http.post("/pause_generation", json={"mode": "abort"}).status_code == 200
                assert http.post("/continue_generation").status_code == 200
        for thread in waiting:
            thread.join(timeout=120)
        assert len(results) == 2 and all(r.status_code == 504 for r in results)
        assert all(r.json()["success"] is False for r in results)
    finally:
        server.stop()


def _third_join(http: httpx.Client, group: dict) -> str:
    body = {**group, "master_port": free_port(), "group_name": "third", "timeout_s": 1}
    answer = http.post("/init_weights_update_group", json=body)
    assert answer.status_code == 409, answer.text
    return str(answer.json()["message"])


def _sglang_group(client: TestClient, group_name: str, **extra: object) -> dist.ProcessGroup:
    """Join the server's weight group from an SGLang-style trainer: the init call waits while rank 0 joins."""
    port = free_port()
    joining = InBackground(
        lambda: client.post("/init_weights_update_group", json={**init_request(port, group_name), **extra})
    )
    group = init_custom_process_group(
        backend="gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        world_size=2,
        rank=0,
        group_name=group_name,
        timeout=TRAINER_TIMEOUT,
    )
    answer = joining.result()
    assert answer.status_code == 200 and answer.json()["success"] is True, answer.text
    return group


def test_an_sglang_style_trainer_updates_the_weights(client: TestClient, models: ConformanceModels) -> None:
    # Before, the server's store never checked in and its keys lacked torch's prefixes: the trainer timed out.
    named = list(models.state(2).items())
    group = _sglang_group(client, "areal_group")
    try:
        updating = InBackground(
            lambda: client.post("/update_weights_from_distributed", json=update_request(named, "areal_group"))
        )
        broadcast_all(group, named)
        answer = updating.result()
        assert answer.status_code == 200 and answer.json()["success"] is True, answer.text
        assert client.post("/weights_checksum", json={}).json()["checksum"] == models.checksum(models.state(2))
        generated = client.post("/generate", json=body())  # no weight_version was sent: it keeps serving
        assert generated.json()["output_ids"] == reference_greedy(models.v2, PROMPT, 4)[0]
        assert client.post("/destroy_weights_update_group", json={"group_name": "areal_group"}).json()["success"]
    finally:
        dist.destroy_process_group(group)
    restored = client.post("/update_weights_from_disk", json={"model_path": str(models.v1_dir), "weight_version": "1"})
    assert restored.json()["success"] is True


def test_a_broadcast_that_never_comes_frees_its_thread(client: TestClient, models: ConformanceModels) -> None:
    # The trainer joins (with our `timeout_s` extension) and then never broadcasts: the receive gives up.
    before = client.post("/weights_checksum", json={}).json()["checksum"]
    group = _sglang_group(client, "stalled", timeout_s=1.5)
    try:
        named = list(models.state(2).items())[:1]
        started = time.monotonic()
        answer = client.post("/update_weights_from_distributed", json=update_request(named, "stalled"))
        assert answer.status_code == 504 and "took over 1.5 s" in answer.json()["message"], answer.text
        assert time.monotonic() - started < 30
        for _ in range(2 * 8):  # more calls than control threads: none is still held
            assert client.post("/flush_cache").status_code == 200
        assert client.post("/weights_checksum", json={}).json()["checksum"] == before
        expect_serving(client, models)
        assert client.post("/destroy_weights_update_group", json={"group_name": "stalled"}).json()["success"]
    finally:
        dist.destroy_process_group(group)


def test_our_trainer_side_meets_an_sglang_server_side() -> None:
    # The other direction: real SGLang servers join with `init_custom_process_group` at rank_offset.
    port, sent = free_port(), [("a", torch.arange(6.0)), ("b", torch.ones(2, 2))]
    joining = InBackground(
        lambda: init_custom_process_group(
            backend="gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            world_size=2,
            rank=1,
            group_name="ours",
            timeout=TRAINER_TIMEOUT,
        )
    )
    trainer = WeightGroup(WeightGroupSpec("127.0.0.1", port, 1, 2, "ours", "gloo", 60.0), 0)
    server_side = joining.result()
    received = [(name, torch.zeros_like(tensor)) for name, tensor in sent]
    receiving = InBackground(lambda: [dist.broadcast(t, src=0, group=server_side) for _, t in received])
    for _, tensor in sent:
        trainer.broadcast(tensor, src=0)
    receiving.result()
    trainer.close()
    dist.destroy_process_group(server_side)
    assert weights_checksum(received) == weights_checksum(sent)
