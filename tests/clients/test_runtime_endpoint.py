"""sglang 0.5.23's `RuntimeEndpoint` (the `sglang.lang` frontend's backend) against our server, with a key."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _clients import API_KEY, client_module
from _rollout_server import ServerProcess

from rl_engines.testing import ConformanceModels


def test_model_info_flush_and_server_info(server: ServerProcess, models: ConformanceModels) -> None:
    endpoint = client_module("sglang.lang.backend.runtime_endpoint").RuntimeEndpoint(server.url, api_key=API_KEY)
    assert endpoint.get_model_name() == str(models.v1_dir)  # read from /get_model_info at construction
    endpoint.flush_cache()  # POST /flush_cache; it only checks the status
    info = endpoint.get_server_info()
    assert info["api_key_required"] is True and info["weight_version"].isdigit()


def test_without_the_key_it_is_refused(server: ServerProcess) -> None:
    runtime_endpoint = client_module("sglang.lang.backend.runtime_endpoint")
    with pytest.raises(RuntimeError, match="missing or wrong API key"):  # it raises the 401's JSON body
        runtime_endpoint.RuntimeEndpoint(server.url)


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
def test_streaming_generate_through_the_frontend(server: ServerProcess) -> None:
    sgl = client_module("sglang")
    endpoint = client_module("sglang.lang.backend.runtime_endpoint").RuntimeEndpoint(server.url, api_key=API_KEY)
    events: list[tuple[str, dict[str, Any]]] = []  # what the client parsed from each SSE event: (new text, meta_info)
    parse_stream = endpoint.generate_stream

    def recorded(*args: Any, **kwargs: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        for event in parse_stream(*args, **kwargs):
            events.append(event)
            yield event

    endpoint.generate_stream = recorded

    @sgl.function
    def continue_text(s: Any) -> None:
        s += "hello world"
        s += sgl.gen("answer", max_tokens=4, temperature=0.0)

    state = continue_text.run(backend=endpoint, stream=True)
    chunks = list(state.text_iter(var_name="answer"))  # the frontend may join events that arrive together
    assert state.error() is None, state.error()  # the frontend's thread keeps the error instead of raising it
    assert "".join(chunks) == state["answer"] == "".join(text for text, _ in events)
    assert len(events) == 5  # one event per token, then the finishing one
    assert [meta["finish_reason"] for _, meta in events][-2:] == [None, {"type": "length", "length": 4}]
    greedy = httpx.post(
        f"{server.url}/generate",
        json={"text": "hello world", "sampling_params": {"max_new_tokens": 4, "temperature": 0.0}},
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    assert greedy.json()["text"] == state["answer"]  # the same continuation, not streamed
