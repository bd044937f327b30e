"""`text` prompts and text answers on `/generate` (SGLang's native protocol), with the served tokenizer.

In process (TestClient) on the 128-token conformance model and a character tokenizer, so each token is one
character: the expected text of any output is known exactly.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _char_tokenizer import char_tokenizer
from fastapi.testclient import TestClient

from rl_engines.rollout import HFEngine, HFEngineConfig
from rl_engines.server import ServerConfig, build_hf_engine, create_app
from rl_engines.testing import ConformanceModels

PROMPT_TEXT = "hello world"
GREEDY = {"max_new_tokens": 5, "temperature": 0.0, "ignore_eos": True}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> ConformanceModels:
    return ConformanceModels.create(tmp_path_factory.mktemp("text-models"))


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return char_tokenizer()


@pytest.fixture(scope="module")
def engine(models: ConformanceModels) -> Iterator[HFEngine]:
    engine = build_hf_engine(str(models.v1_dir), HFEngineConfig(initial_version=1))
    yield engine
    engine.shutdown()


def _client(engine: HFEngine, tokenizer: Any | None, **config: Any) -> Iterator[TestClient]:
    app = create_app(engine, ServerConfig(**config), tokenizer=tokenizer, owns_engine=False)
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def client(engine: HFEngine, tokenizer: Any) -> Iterator[TestClient]:
    yield from _client(engine, tokenizer)


@pytest.fixture(scope="module")
def plain(engine: HFEngine) -> Iterator[TestClient]:
    """The same engine served without a tokenizer."""
    yield from _client(engine, None)


def ids_of(tokenizer: Any, text: str) -> list[int]:
    return tokenizer(text)["input_ids"]


def _soon(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Whether `check` holds within `timeout_s` (an abort runs on the control pool, maybe after the answer)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def events(response: Any) -> list[dict[str, Any]]:
    lines = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]", lines[-3:]
    return [json.loads(line) for line in lines[:-1]]


def test_a_text_prompt_answers_the_same_tokens_as_its_ids_and_their_text(client: TestClient, tokenizer: Any) -> None:
    by_text = client.post("/generate", json={"text": PROMPT_TEXT, "sampling_params": GREEDY, "return_logprob": True})
    ids = ids_of(tokenizer, PROMPT_TEXT)
    by_ids = client.post("/generate", json={"input_ids": ids, "sampling_params": GREEDY, "return_logprob": True})
    assert by_text.status_code == 200, by_text.text
    text_answer, ids_answer = by_text.json(), by_ids.json()
    assert text_answer["output_ids"] == ids_answer["output_ids"]  # bit-identical, log-probs included
    text_logprobs = text_answer["meta_info"]["output_token_logprobs"]
    assert text_logprobs == ids_answer["meta_info"]["output_token_logprobs"]
    assert text_answer["meta_info"]["prompt_tokens"] == len(ids)
    expected = tokenizer.decode(text_answer["output_ids"], skip_special_tokens=True)
    assert text_answer["text"] == ids_answer["text"] == expected
    assert list(text_answer) == ["text", "output_ids", "meta_info"]  # SGLang's shape


def test_a_batch_of_texts_keeps_order_and_matches_the_ids_batch(client: TestClient, tokenizer: Any) -> None:
    texts = ["hello world", "abc", "The cat sat"]
    by_text = client.post("/generate", json={"text": texts, "sampling_params": GREEDY, "rid": ["a", "b", "c"]})
    assert by_text.status_code == 200, by_text.text
    by_ids = client.post(
        "/generate", json={"input_ids": [ids_of(tokenizer, t) for t in texts], "sampling_params": GREEDY}
    )
    answers = by_text.json()
    assert [a["meta_info"]["id"] for a in answers] == ["a", "b", "c"]
    assert [a["output_ids"] for a in answers] == [a["output_ids"] for a in by_ids.json()]
    assert [a["text"] for a in answers] == [
        tokenizer.decode(a["output_ids"], skip_special_tokens=True) for a in answers
    ]


@pytest.mark.parametrize(
    ("request_body", "message"),
    [
        ({"text": "hi", "input_ids": [1, 2]}, "exactly one of text and input_ids, got both"),
        ({"sampling_params": GREEDY}, "exactly one of text (a prompt string, or a list of them) and input_ids"),
        ({"text": ["hi", 3]}, "text[1] must be a string"),
        ({"text": []}, "text must be a string or a non-empty list of strings"),
        ({"text": "hi", "sampling_params": {**GREEDY, "stop": [""]}}, "sampling_params.stop must be"),
        ({"text": "hi", "sampling_params": {**GREEDY, "no_stop_trim": "yes"}}, "no_stop_trim must be true or false"),
    ],
)
def test_bad_text_requests_are_400_naming_the_field(client: TestClient, request_body: dict, message: str) -> None:
    response = client.post("/generate", json={"sampling_params": GREEDY, **request_body})
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]["message"]
    one = {**GREEDY, "max_new_tokens": 1}
    assert client.post("/generate", json={"text": PROMPT_TEXT, "sampling_params": one}).status_code == 200


def test_without_a_tokenizer_text_is_501_naming_the_flag_and_ids_answers_are_unchanged(plain: TestClient) -> None:
    for request_body in (
        {"text": PROMPT_TEXT, "sampling_params": GREEDY},
        {"input_ids": [5, 6], "sampling_params": {**GREEDY, "stop": ["x"]}},
    ):
        response = plain.post("/generate", json=request_body)
        assert response.status_code == 501, response.text
        error = response.json()["error"]
        assert "--tokenizer" in error["message"] and error["type"] == "InvalidRequestError"
    both = plain.post("/generate", json={"text": "a", "input_ids": [5], "sampling_params": GREEDY})
    assert both.status_code == 400 and "got both" in both.json()["error"]["message"]
    answer = plain.post("/generate", json={"input_ids": [5, 6], "sampling_params": GREEDY}).json()
    assert list(answer) == ["output_ids", "meta_info"]  # no text without a tokenizer, as before
    streamed = events(plain.post("/generate", json={"input_ids": [5, 6], "sampling_params": GREEDY, "stream": True}))
    assert all("text" not in chunk for chunk in streamed)


def test_streamed_chunks_carry_the_cumulative_text(client: TestClient, tokenizer: Any) -> None:
    request = {"text": PROMPT_TEXT, "sampling_params": GREEDY, "return_logprob": True, "return_text_in_logprobs": True}
    whole = client.post("/generate", json=request).json()
    chunks = events(client.post("/generate", json={**request, "stream": True}))
    assert len(chunks) == GREEDY["max_new_tokens"] + 1  # one per token, then the finishing chunk
    for chunk in chunks:
        assert chunk["text"] == tokenizer.decode(chunk["output_ids"], skip_special_tokens=True)
        for _, token, token_text in chunk["meta_info"]["output_token_logprobs"]:
            assert token_text == tokenizer.decode([token])
    assert chunks[-1]["text"] == whole["text"] and chunks[-1]["output_ids"] == whole["output_ids"]
    assert [c["meta_info"]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)


def test_incremental_stream_chunks_carry_the_new_text(engine: HFEngine, tokenizer: Any) -> None:
    for incremental in _client(engine, tokenizer, incremental_stream=True):
        request = {"text": [PROMPT_TEXT, "abc"], "sampling_params": GREEDY, "stream": True}
        chunks = events(incremental.post("/generate", json=request))
        for index in (0, 1):
            mine = [c for c in chunks if c["index"] == index]
            ids = [t for c in mine for t in c["output_ids"]]
            assert "".join(c["text"] for c in mine) == tokenizer.decode(ids, skip_special_tokens=True)


def test_a_stop_string_cuts_tokens_and_text_and_aborts_the_rest(
    client: TestClient, engine: HFEngine, tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    aborted: list[str] = []
    abort = engine.abort
    monkeypatch.setattr(engine, "abort", lambda rids=None: (aborted.extend(rids or ()), abort(rids)))
    long = {**GREEDY, "max_new_tokens": 10}
    full = client.post("/generate", json={"text": PROMPT_TEXT, "sampling_params": long, "return_logprob": True}).json()
    ids = full["output_ids"]
    stop_at = next(k for k in range(3, len(ids)) if ids[k] not in (0, 127) and ids[k] not in ids[:k])  # a plain char
    stop = tokenizer.decode([ids[stop_at]])
    request = {"text": PROMPT_TEXT, "sampling_params": {**long, "stop": stop}, "return_logprob": True, "rid": "s1"}
    answer = client.post("/generate", json=request).json()
    assert _soon(lambda: aborted == ["s1"])  # when the stop was seen, not at the end of the budget
    assert answer["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
    assert answer["output_ids"] == ids[: stop_at + 1]  # through the token completing the stop string
    assert answer["meta_info"]["output_token_logprobs"] == full["meta_info"]["output_token_logprobs"][: stop_at + 1]
    assert answer["text"] == tokenizer.decode(ids[:stop_at], skip_special_tokens=True)  # the stop trimmed
    kept = client.post(
        "/generate", json={**request, "rid": "s1b", "sampling_params": {**long, "stop": [stop], "no_stop_trim": True}}
    )
    assert kept.json()["text"] == tokenizer.decode(ids[: stop_at + 1], skip_special_tokens=True)
    chunks = events(client.post("/generate", json={**request, "rid": "s2", "stream": True}))
    assert _soon(lambda: "s2" in aborted)
    assert all(stop not in c["text"] for c in chunks[:-1]) and chunks[-1]["text"] == answer["text"]
    assert (
        chunks[-1]["output_ids"] == answer["output_ids"] and chunks[-1]["meta_info"]["finish_reason"]["matched"] == stop
    )
