"""Prompt log-probs on `/generate` (`logprob_start_len`, `top_logprobs_num`) in SGLang's shapes: values equal a
plain forward of the served model, position 0 is None, the start index is honoured, top-k is sorted and holds the
greedy token; batch, prefill-only and streaming; 400s for bad values and for an engine that cannot score.

In process (TestClient) on the 128-token conformance model and a character tokenizer.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from rl_engines.rollout import EngineAsleepError, HFEngine
from rl_engines.server import ServerConfig, create_app

PROMPT = [5, 6, 7, 9, 11]
GREEDY = {"max_new_tokens": 3, "temperature": 0.0, "ignore_eos": True}
TOL = 1e-4


def _reference(engine: HFEngine, ids: list[int], temperature: float = 0.0) -> torch.Tensor:
    """`[len(ids), V]`: row p is the log-distribution of the token at position p + 1 (a plain forward)."""
    with torch.no_grad():
        logits = engine.model(input_ids=torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits / temperature if temperature > 0 else logits, dim=-1)


def _post(client: TestClient, **body: Any) -> Any:
    response = client.post("/generate", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def _check_top(entries: list[list[Any]], ref_row: torch.Tensor, k: int) -> None:
    values = [e[0] for e in entries]
    assert len(entries) == k and values == sorted(values, reverse=True)
    top = ref_row.topk(k)
    assert [e[1] for e in entries] == top.indices.tolist()
    assert values == pytest.approx(top.values.tolist(), abs=TOL)


def test_input_and_top_logprobs_equal_a_plain_forward(client: TestClient, engine: HFEngine) -> None:
    answer = _post(
        client,
        input_ids=PROMPT,
        sampling_params=GREEDY,
        return_logprob=True,
        logprob_start_len=0,
        top_logprobs_num=3,
        return_text_in_logprobs=True,
    )
    answer_ids = [e[1] for e in answer["meta_info"]["output_token_logprobs"]]
    info = answer["meta_info"]
    ref = _reference(engine, PROMPT + answer_ids)
    inputs = info["input_token_logprobs"]
    assert [e[1] for e in inputs] == PROMPT and [e[2] for e in inputs] == [chr(t) for t in PROMPT]
    assert inputs[0][0] is None  # the first prompt token has no context
    assert [e[0] for e in inputs[1:]] == pytest.approx([ref[p - 1, PROMPT[p]].item() for p in range(1, 5)], abs=TOL)
    assert info["input_top_logprobs"][0] is None and len(info["input_top_logprobs"]) == len(PROMPT)
    for p in range(1, len(PROMPT)):
        _check_top(info["input_top_logprobs"][p], ref[p - 1], 3)
    outputs = info["output_top_logprobs"]
    assert len(outputs) == len(answer_ids) == 3
    for j, (top, sampled) in enumerate(zip(outputs, info["output_token_logprobs"], strict=True)):
        _check_top(top, ref[len(PROMPT) - 1 + j], 3)
        assert top[0][1] == sampled[1] and top[0][0] == pytest.approx(sampled[0], abs=TOL)  # greedy = the argmax
        assert top[0][2] == chr(sampled[1])


def test_start_index_and_temperature_are_honoured(client: TestClient, engine: HFEngine) -> None:
    sampling = {"max_new_tokens": 2, "temperature": 0.7, "sampling_seed": 3}
    info = _post(client, input_ids=PROMPT, sampling_params=sampling, return_logprob=True, logprob_start_len=3)[
        "meta_info"
    ]
    ref = _reference(engine, PROMPT, temperature=0.7)
    assert info["input_token_logprobs"] == [
        [pytest.approx(ref[p - 1, PROMPT[p]].item(), abs=TOL), PROMPT[p], None] for p in (3, 4)
    ]
    assert "input_top_logprobs" not in info and "output_top_logprobs" not in info
    text = _post(client, text="abc", sampling_params=sampling, return_logprob=True, logprob_start_len=1)["meta_info"]
    assert [entry[1] for entry in text["input_token_logprobs"]] == [ord("b"), ord("c")]  # tokenised, then scored
    plain = _post(client, input_ids=PROMPT, sampling_params=sampling, return_logprob=True)["meta_info"]
    assert "input_token_logprobs" not in plain  # -1 (the default): output log-probs only, as SGLang
    ignored = _post(client, input_ids=PROMPT, sampling_params=sampling, logprob_start_len=0, top_logprobs_num=2)
    assert set(ignored["meta_info"]) == set(plain) - {"output_token_logprobs"}  # no return_logprob: ignored


def test_batch_and_prefill_only(client: TestClient, engine: HFEngine) -> None:
    zero = {"max_new_tokens": 0, "temperature": 0.0}
    answers = _post(
        client,
        input_ids=[PROMPT, PROMPT[:3]],
        sampling_params=[zero, GREEDY],
        return_logprob=True,
        logprob_start_len=[1, -1],
        top_logprobs_num=[0, 2],
    )
    first, second = answers[0]["meta_info"], answers[1]["meta_info"]
    ref = _reference(engine, PROMPT)
    assert answers[0]["output_ids"] == [] and "output_top_logprobs" not in first
    assert [e[0] for e in first["input_token_logprobs"]] == pytest.approx(
        [ref[p - 1, PROMPT[p]].item() for p in range(1, 5)], abs=TOL
    )
    assert "input_token_logprobs" not in second and len(second["output_top_logprobs"]) == 3
    assert [top[0][1] for top in second["output_top_logprobs"]] == answers[1]["output_ids"]
    only_top = _post(client, input_ids=PROMPT, sampling_params=zero, return_logprob=True, top_logprobs_num=2)
    assert only_top["meta_info"]["output_top_logprobs"] == []


def _final_chunk(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/generate", json={**body, "stream": True})
    lines = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return json.loads(lines[-2])["meta_info"]


def test_stream_final_chunk_carries_them(client: TestClient, engine: HFEngine) -> None:
    body = {
        "input_ids": PROMPT,
        "sampling_params": GREEDY,
        "return_logprob": True,
        "logprob_start_len": 0,
        "top_logprobs_num": 2,
    }
    whole = _post(client, **body)["meta_info"]
    app = create_app(engine, ServerConfig(incremental_stream=True), owns_engine=False)
    with TestClient(app) as incremental:
        for final in (_final_chunk(client, body), _final_chunk(incremental, body)):
            for key in ("input_token_logprobs", "input_top_logprobs", "output_top_logprobs"):
                assert final[key] == whole[key], key


def test_a_failed_scoring_is_an_error_not_a_partial_answer(
    client: TestClient, engine: HFEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    def asleep(*_: Any, **__: Any) -> Any:
        raise EngineAsleepError("weights are asleep")  # as if they were released between generating and scoring

    monkeypatch.setattr(engine, "score_tokens", asleep)
    body = {"input_ids": PROMPT, "sampling_params": GREEDY, "return_logprob": True, "top_logprobs_num": 2}
    response = client.post("/generate", json=body)
    assert response.status_code == 503 and "EngineAsleepError" in response.text
    streamed = client.post("/generate", json={**body, "stream": True}).text.splitlines()
    lines = [line[len("data: ") :] for line in streamed if line.startswith("data: ")]
    assert lines[-1] == "[DONE]" and json.loads(lines[-2])["error"]["type"] == "EngineAsleepError"


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"logprob_start_len": 5}, "logprob_start_len=5 is not below the prompt's 5 tokens"),
        ({"logprob_start_len": -2}, "logprob_start_len must be an int >= -1"),
        ({"logprob_start_len": "0"}, "logprob_start_len must be an int >= -1"),
        ({"top_logprobs_num": -1}, "top_logprobs_num must be an int >= 0"),
        ({"top_logprobs_num": True}, "top_logprobs_num must be an int >= 0"),
        ({"token_ids_logprob": [1]}, "token_ids_logprob"),
    ],
)
def test_bad_values_are_400s_naming_the_field(client: TestClient, extra: dict[str, Any], needle: str) -> None:
    body = {"input_ids": PROMPT, "sampling_params": GREEDY, "return_logprob": True, **extra}
    response = client.post("/generate", json=body)
    assert response.status_code == 400 and needle in response.text, response.text


class _CannotScore:
    """The engine without `score_tokens` (as vLLM or a remote engine)."""

    def __init__(self, engine: HFEngine) -> None:
        self._engine = engine

    def __getattr__(self, name: str) -> Any:
        if name == "score_tokens":
            raise AttributeError(name)
        return getattr(self._engine, name)


def test_an_engine_that_cannot_score_refuses(engine: HFEngine) -> None:
    app = create_app(_CannotScore(engine), ServerConfig(), owns_engine=False)  # pyright: ignore[reportArgumentType]
    with TestClient(app) as client:
        body = {"input_ids": PROMPT, "sampling_params": GREEDY, "return_logprob": True, "logprob_start_len": 0}
        response = client.post("/generate", json=body)
        assert response.status_code == 400 and "logprob_start_len needs an engine that can score" in response.text
        assert client.post("/generate", json={**body, "logprob_start_len": -1}).status_code == 200
