"""Who may drive the server: `--api-key` on every route but `/health`, and no unauthenticated exposure.

Every route the app registers is probed without a key and with a wrong one (401, and the engine's state is
unchanged afterwards); a client with the key drives a real server process end to end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from _rollout_server import ServerProcess
from fastapi.testclient import TestClient

from rl_engines.remote import API_KEY_ENV, AuthenticationError, RemoteEngine, RemoteEngineConfig
from rl_engines.rollout import GenerateRequest, HFEngineConfig, InvalidRequestError, SamplingParams
from rl_engines.server import ServerConfig, build_hf_engine, create_app
from rl_engines.server._auth import OPEN_PATHS, bind_problem, is_loopback
from rl_engines.testing import ConformanceModels, reference_greedy

KEY = "s3cret-key"
PROMPT = [5, 17, 42, 9, 77]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> ConformanceModels:
    return ConformanceModels.create(tmp_path_factory.mktemp("auth-models"))


@pytest.fixture(scope="module")
def app_client(models: ConformanceModels) -> Iterator[tuple[TestClient, list[tuple[str, str]]]]:
    engine = build_hf_engine(str(models.v1_dir), HFEngineConfig(initial_version=1))
    app = create_app(engine, ServerConfig(api_key=KEY))
    routes = sorted((method, route.path) for route in app.routes for method in getattr(route, "methods", ()) or ())
    with TestClient(app) as client:
        yield client, routes


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        *[("127.0.0.1", True), ("127.8.0.1", True), ("localhost", True), ("::1", True), ("[::1]", True)],
        *[("0.0.0.0", False), ("::", False), ("10.1.2.3", False), ("example.org", False)],
    ],
)
def test_loopback_addresses_are_recognised(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_binding_off_loopback_needs_a_key_or_an_explicit_opt_out() -> None:
    problem = bind_problem("0.0.0.0", None, allow_unauthenticated=False)
    assert problem is not None and "--api-key" in problem and "--allow-unauthenticated" in problem
    assert bind_problem("0.0.0.0", KEY, allow_unauthenticated=False) is None
    assert bind_problem("0.0.0.0", None, allow_unauthenticated=True) is None
    assert bind_problem("127.0.0.1", None, allow_unauthenticated=False) is None
    with pytest.raises(InvalidRequestError, match="without an API key"):
        ServerConfig(host="0.0.0.0")
    with pytest.raises(InvalidRequestError, match="api_key"):
        ServerConfig(api_key="")


def test_the_command_refuses_0_0_0_0_without_a_key_before_loading_anything() -> None:
    # The model path does not exist: the refusal must come first, naming the fix.
    command = [sys.executable, "-m", "rl_engines.server", "--model", "/nonexistent", "--host", "0.0.0.0"]
    env = {k: v for k, v in os.environ.items() if k != API_KEY_ENV}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2, done.stderr
    assert "without an API key" in done.stderr and "--api-key" in done.stderr


def test_every_route_but_health_answers_401_without_the_key(
    app_client: tuple[TestClient, list[tuple[str, str]]],
) -> None:
    client, routes = app_client
    probed = [(method, path) for method, path in routes if path not in OPEN_PATHS]
    # The weight, memory and version routes are the dangerous ones: they must be among those probed.
    paths = {path for _, path in probed}
    assert {"/update_weights_from_disk", "/release_memory_occupation", "/update_weight_version"} <= paths
    assert "/generate" in paths and "/health_generate" in paths
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}, {"Authorization": f"bearer {KEY}"}):
        for method, path in probed:
            response = client.request(method, path, headers=headers, json={})
            assert response.status_code == 401, (method, path, headers, response.status_code)
            assert response.json()["error"] == "Unauthorized"
    assert client.get("/health").status_code == 200


def test_refused_calls_change_nothing(app_client: tuple[TestClient, list[tuple[str, str]]]) -> None:
    client, _ = app_client
    auth = {"Authorization": f"Bearer {KEY}"}
    before = client.get("/get_weight_version", headers=auth).json()
    for path, body in [
        ("/update_weight_version", {"new_version": "99"}),
        ("/release_memory_occupation", {}),
        ("/update_weights_from_disk", {"model_path": "/tmp/elsewhere"}),
        ("/pause_generation", {}),
    ]:
        assert client.post(path, json=body, headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.get("/get_weight_version", headers=auth).json() == before
    response = client.post(
        "/generate",
        headers=auth,
        json={"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 3, "temperature": 0.0, "ignore_eos": True}},
    )
    assert response.status_code == 200, response.text


def test_a_client_with_the_key_drives_a_real_server_and_one_without_is_told_why(
    models: ConformanceModels, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(API_KEY_ENV, KEY)  # the server reads its key from the environment here
    server = ServerProcess(str(models.v1_dir), "--timeout-s", "20")
    try:
        assert httpx.post(f"{server.url}/generate", json={"input_ids": PROMPT}).status_code == 401
        with pytest.raises(AuthenticationError, match="api_key"):
            RemoteEngine(RemoteEngineConfig(server.url))
        request = GenerateRequest("r0", tuple(PROMPT), SamplingParams(max_new_tokens=4, temperature=0.0))
        engine = RemoteEngine(RemoteEngineConfig(server.url, api_key=KEY))
        try:
            [output] = engine.generate([request])
            assert list(output.output_ids) == reference_greedy(models.v1, PROMPT, 4)[0]
        finally:
            engine.shutdown()
    finally:
        server.stop()
