"""`sampling_params.max_new_tokens: 0` on `/generate`: SGLang's prefill-only request (no output tokens, finish
reason length 0), single, batch and streaming; a negative budget stays a 400 naming the field.

In process (TestClient) on the 128-token conformance model and a character tokenizer.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rl_engines.rollout import InvalidRequestError, SamplingParams

PROMPT = [5, 6, 7]
ZERO = {"max_new_tokens": 0, "temperature": 0.0}
GREEDY = {"max_new_tokens": 3, "temperature": 0.0, "ignore_eos": True}
LENGTH_0 = {"type": "length", "length": 0}


def _events(response: Any) -> list[dict[str, Any]]:
    lines = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]", lines[-3:]
    return [json.loads(line) for line in lines[:-1]]


@pytest.mark.parametrize("return_logprob", [False, True])
def test_zero_new_tokens_answers_the_prompt_only_as_sglang(client: TestClient, return_logprob: bool) -> None:
    body = {"input_ids": PROMPT, "sampling_params": ZERO, "return_logprob": return_logprob, "rid": "z"}
    response = client.post("/generate", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["text"] == "" and answer["output_ids"] == []
    meta = answer["meta_info"]
    assert meta["id"] == "z" and meta["finish_reason"] == LENGTH_0
    assert meta["prompt_tokens"] == len(PROMPT) and meta["completion_tokens"] == 0
    assert meta["weight_version"] == "1"
    if return_logprob:
        assert meta["output_token_logprobs"] == []
    else:
        assert "output_token_logprobs" not in meta


def test_a_batch_mixes_zero_and_generating_requests(client: TestClient) -> None:
    alone = client.post("/generate", json={"input_ids": [8, 9], "sampling_params": GREEDY, "return_logprob": True})
    body = {"input_ids": [PROMPT, [8, 9]], "sampling_params": [ZERO, GREEDY], "return_logprob": True}
    response = client.post("/generate", json=body)
    assert response.status_code == 200, response.text
    first, second = response.json()
    assert first["output_ids"] == [] and first["meta_info"]["finish_reason"] == LENGTH_0
    assert first["meta_info"]["output_token_logprobs"] == []
    assert second["output_ids"] == alone.json()["output_ids"] and len(second["output_ids"]) == 3
    shared = client.post("/generate", json={"input_ids": [PROMPT, [8, 9]], "sampling_params": ZERO}).json()
    assert [a["output_ids"] for a in shared] == [[], []]  # one sampling_params for the whole batch
    assert [a["meta_info"]["prompt_tokens"] for a in shared] == [3, 2]


def test_a_zero_token_stream_sends_only_its_final_chunk(client: TestClient) -> None:
    body = {"input_ids": [PROMPT, [8, 9]], "sampling_params": [ZERO, GREEDY], "stream": True}
    chunks = _events(client.post("/generate", json=body))
    zero = [c for c in chunks if c["index"] == 0]
    assert len(zero) == 1 and zero[0]["output_ids"] == [] and zero[0]["text"] == ""
    assert zero[0]["meta_info"]["finish_reason"] == LENGTH_0 and zero[0]["meta_info"]["completion_tokens"] == 0
    assert [c["meta_info"]["finish_reason"] for c in chunks if c["index"] == 1][-1] == {"type": "length", "length": 3}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"input_ids": PROMPT, "sampling_params": {"max_new_tokens": -1}}, "max_new_tokens must be an int >= 0"),
        ({"input_ids": [PROMPT], "sampling_params": [{"max_new_tokens": -2}]}, "generate[0]: sampling_params"),
        ({"input_ids": [5, 100000], "sampling_params": ZERO}, "outside the vocabulary"),
    ],
)
def test_bad_zero_budget_requests_are_400(client: TestClient, body: dict, message: str) -> None:
    response = client.post("/generate", json=body)
    assert response.status_code == 400, response.text
    assert message in response.text


def test_engines_still_take_at_least_one_token() -> None:
    with pytest.raises(InvalidRequestError, match="max_new_tokens must be an int >= 1"):
        SamplingParams(max_new_tokens=0)
