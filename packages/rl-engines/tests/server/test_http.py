"""The rollout server over real HTTP (a subprocess on 127.0.0.1): shapes, bad input, streaming, sleep, versions.

Every rejected request is followed by a request that succeeds, so the server is shown to keep serving.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import httpx
import pytest
import torch
from _rollout_server import ServerProcess

from rl_engines.remote import RemoteEngine, RemoteEngineConfig, serialize_named_tensors
from rl_engines.rollout import GenerateRequest, SamplingParams
from rl_engines.testing import ConformanceModels, reference_greedy, reference_logprobs

LIMIT = 64 * 1024
PROMPT = [5, 17, 42, 9, 77]
NEW_TOKENS = 6
ATOL = 1e-4


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> ConformanceModels:
    return ConformanceModels.create(tmp_path_factory.mktemp("server-models"))


@pytest.fixture(scope="module")
def server(models: ConformanceModels) -> Iterator[ServerProcess]:
    process = ServerProcess(str(models.v1_dir), "--max-request-bytes", str(LIMIT), "--timeout-s", "20")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60.0) as http:
        yield http


def body(prompt: list[int] = PROMPT, n: int = NEW_TOKENS, **extra: object) -> dict:
    sampling = {"max_new_tokens": n, "temperature": 0.0, "ignore_eos": True}
    return {"input_ids": prompt, "sampling_params": sampling, "return_logprob": True, **extra}


def expect_serving(client: httpx.Client, models: ConformanceModels) -> None:
    response = client.post("/generate", json=body())
    assert response.status_code == 200, response.text
    assert response.json()["output_ids"] == reference_greedy(models.v1, PROMPT, NEW_TOKENS)[0]


def sse_events(response: httpx.Response) -> list:
    lines = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]", lines[-3:]
    return [json.loads(line) for line in lines[:-1]]


def test_generate_matches_hf_reference(client: httpx.Client, models: ConformanceModels) -> None:
    data = client.post("/generate", json=body(rid="r1")).json()
    meta = data["meta_info"]
    assert data["output_ids"] == reference_greedy(models.v1, PROMPT, NEW_TOKENS)[0]
    assert meta["id"] == "r1" and meta["prompt_tokens"] == len(PROMPT) and meta["weight_version"] == "1"
    assert meta["finish_reason"] == {"type": "length", "length": NEW_TOKENS}
    assert [tok for _, tok, _ in meta["output_token_logprobs"]] == data["output_ids"]
    reference = reference_logprobs(models.v1, PROMPT, data["output_ids"], 0.0)
    assert [lp for lp, _, _ in meta["output_token_logprobs"]] == pytest.approx(reference, abs=ATOL)


def test_batch_keeps_request_order(client: httpx.Client, models: ConformanceModels) -> None:
    prompts = models.prompts(3, seed=2)
    results = client.post("/generate", json=body(prompts, rid=["a", "b", "c"])).json()
    assert [r["meta_info"]["id"] for r in results] == ["a", "b", "c"]
    for result, prompt in zip(results, prompts, strict=True):
        assert result["output_ids"] == reference_greedy(models.v1, prompt, NEW_TOKENS)[0]


def test_malformed_json_is_400_then_serves(client: httpx.Client, models: ConformanceModels) -> None:
    response = client.post("/generate", content=b'{"input_ids": [1,', headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert "malformed JSON" in response.json()["error"]["message"]
    assert client.post("/generate", content=b"[1, 2]").status_code == 400
    expect_serving(client, models)


def test_oversize_body_is_413_then_serves(client: httpx.Client, models: ConformanceModels) -> None:
    big = body(prompt=[1] * (LIMIT // 2))
    response = client.post("/generate", json=big)
    assert response.status_code == 413
    assert f"limit of {LIMIT} bytes" in response.json()["error"]["message"]
    chunked = client.post("/generate", content=iter([b" " * LIMIT, b" " * LIMIT]))  # no content-length
    assert chunked.status_code == 413
    expect_serving(client, models)


def test_unknown_or_unsupported_fields_are_400(client: httpx.Client, models: ConformanceModels) -> None:
    wrong = client.post("/generate", json={"input_ids": PROMPT, "sampling_params": {"max_tokens": 3}})
    assert wrong.status_code == 400
    assert "did you mean 'max_new_tokens'" in wrong.json()["error"]["message"]
    penalty = body()
    penalty["sampling_params"]["repetition_penalty"] = 1.3
    assert "not supported" in client.post("/generate", json=penalty).json()["error"]["message"]
    neutral = body()
    neutral["sampling_params"].update(repetition_penalty=1.0, skip_special_tokens=True)
    assert client.post("/generate", json=neutral).status_code == 200
    assert client.post("/pause_generation", json={"mode": "sideways"}).status_code == 400
    expect_serving(client, models)


def _update(client: httpx.Client, named: list[tuple[str, torch.Tensor]], **extra: object) -> httpx.Response:
    payload = {"serialized_named_tensors": [serialize_named_tensors(named)], "flush_cache": True, **extra}
    return client.post("/update_weights_from_tensor", json=payload)


def _checksum(client: httpx.Client) -> str:
    return client.post("/weights_checksum", json={}).json()["checksum"]


@pytest.mark.parametrize(
    ("kind", "error_type", "words"),
    [("unknown", "UnknownParameterError", "no_such_tensor"), ("shape", "ParameterShapeError", "shape")],
)
def test_bad_weight_update_is_400_then_serves(
    client: httpx.Client, models: ConformanceModels, kind: str, error_type: str, words: str
) -> None:
    name = models.names[0]
    good = models.state(2)[name]
    named = (
        [("model.no_such_tensor.weight", good), (name, good)]
        if kind == "unknown"
        else [(name, torch.zeros(good.shape[0] + 1, *good.shape[1:]))]
    )
    response = _update(client, named)
    assert response.status_code == 400
    answer = response.json()
    assert answer["success"] is False and answer["error_type"] == error_type and words in answer["message"]
    assert _checksum(client) == models.checksum(models.state(1))
    assert client.get("/get_weight_version").json() == {"weight_version": "1"}
    expect_serving(client, models)


def test_malformed_tensor_payload_is_400(client: httpx.Client, models: ConformanceModels) -> None:
    response = client.post("/update_weights_from_tensor", json={"serialized_named_tensors": ["not base64!"]})
    assert response.status_code == 400 and "base64" in response.json()["message"]
    missing = client.post("/update_weights_from_disk", json={"model_path": "/no/such/dir"})
    assert missing.status_code == 400 and "/no/such/dir" in missing.json()["message"]
    expect_serving(client, models)


def test_generate_while_asleep_is_503_then_serves(client: httpx.Client, models: ConformanceModels) -> None:
    assert client.post("/release_memory_occupation", json={"tags": ["weights", "kv_cache"]}).status_code == 200
    try:
        response = client.post("/generate", json=body())
        assert response.status_code == 503
        assert response.json()["error"]["type"] == "EngineAsleepError"
        assert "wake_up" in response.json()["error"]["message"]
        assert client.get("/health_generate").status_code == 503
        assert client.get("/health").status_code == 200
    finally:
        assert client.post("/resume_memory_occupation", json={}).status_code == 200
    assert client.get("/health_generate").status_code == 200
    expect_serving(client, models)


def test_stream_yields_the_same_tokens(client: httpx.Client, models: ConformanceModels) -> None:
    prompts = models.prompts(2, seed=3)
    for request in (body(n=8), body(prompts, n=8, rid=["x", "y"])):
        for sampling in ({"temperature": 0.0}, {"temperature": 1.0, "sampling_seed": 7}):
            request["sampling_params"].update(sampling)
            plain = client.post("/generate", json=request).json()
            plain = plain if isinstance(plain, list) else [plain]
            events = sse_events(client.post("/generate", json={**request, "stream": True}))
            for index, expected in enumerate(plain):
                mine = [e for e in events if e.get("index", 0) == index]
                assert mine[-1]["output_ids"] == expected["output_ids"]
                assert mine[-1]["meta_info"]["finish_reason"] == expected["meta_info"]["finish_reason"]
                got = [lp for lp, _, _ in mine[-1]["meta_info"]["output_token_logprobs"]]
                assert got == pytest.approx([lp for lp, _, _ in expected["meta_info"]["output_token_logprobs"]])
                for earlier, later in itertools.pairwise(mine):  # cumulative chunks only grow
                    assert later["output_ids"][: len(earlier["output_ids"])] == earlier["output_ids"]
                assert len(mine) == 9  # one chunk per token, then the finishing chunk


def test_remote_engine_streams_the_same_tokens(server: ServerProcess, models: ConformanceModels) -> None:
    engine = RemoteEngine(RemoteEngineConfig(server.url, timeout_s=60.0))
    try:
        requests = [
            GenerateRequest(f"s{i}", tuple(p), SamplingParams(max_new_tokens=8, temperature=0.0, ignore_eos=True))
            for i, p in enumerate(models.prompts(3, seed=4))
        ]
        streamed: dict[str, list[int]] = {}
        outputs = engine.generate(
            requests, on_tokens=lambda ev: [streamed.setdefault(r, []).append(t) for r, t, _ in ev]
        )
        plain = engine.generate(requests)
        assert [o.output_ids for o in outputs] == [o.output_ids for o in plain]
        assert {r: tuple(ids) for r, ids in streamed.items()} == {o.rid: o.output_ids for o in plain}
    finally:
        engine.shutdown()


def test_update_without_version_keeps_serving_under_the_next_version(
    client: httpx.Client, models: ConformanceModels
) -> None:
    # SGLang keeps serving after an update without weight_version, and none of verl's, AReaL's or sglang's
    # clients sends one: the version moves on by one instead of blocking generation.
    name = models.names[0]
    same = [(name, models.state(1)[name].clone())]
    before = int(client.get("/get_weight_version").json()["weight_version"])
    answer = _update(client, same)
    assert answer.status_code == 200 and f"the version is now {before + 1}" in answer.json()["message"]
    served = client.post("/generate", json=body())
    assert served.status_code == 200 and served.json()["meta_info"]["weight_version"] == str(before + 1)
    answer = client.post("/update_weight_version", json={"new_version": "1"}).json()
    assert answer == {"success": True, "message": "Weight version updated to 1", "new_version": "1"}
    expect_serving(client, models)
    labelled = _update(client, same, weight_version="1")
    assert labelled.status_code == 200 and labelled.json()["success"] is True
    expect_serving(client, models)


def test_model_info_and_status(client: httpx.Client) -> None:
    info = client.get("/model_info").json()
    assert info["weight_version"] == "1" and info["is_generation"] is True
    assert {"disk", "tensor", "distributed", "stream"} <= set(info["capabilities"])
    assert client.get("/get_model_info").json() == info
    status = client.get("/engine_status").json()
    assert status["state"] == "serving" and status["in_flight"] == 0 and status["asleep"] == []
    assert client.post("/flush_cache").text == "Cache flushed.\n"
