"""sglang 0.5.23's `RuntimeEndpoint` (the `sglang.lang` frontend's backend) against our server, with a key."""

from __future__ import annotations

from typing import Any

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
@pytest.mark.xfail(
    strict=True,
    reason="a property of this server, not of the client or CPU: the frontend's only streaming call "
    "(RuntimeEndpoint.generate_stream) posts a `text` prompt and reads each event's cumulative `text`; this server "
    "takes and answers token ids only (`text` answers 400 'is not supported by this server'). AReaL and the "
    "adapters never stream, so no real client streams against it yet; the server's own tests cover its SSE shape",
)
def test_streaming_generate_through_the_frontend(server: ServerProcess) -> None:
    sgl = client_module("sglang")
    endpoint = client_module("sglang.lang.backend.runtime_endpoint").RuntimeEndpoint(server.url, api_key=API_KEY)

    @sgl.function
    def continue_text(s: Any) -> None:
        s += "hello world"
        s += sgl.gen("answer", max_tokens=4, temperature=0.0)

    state = continue_text.run(backend=endpoint, stream=True)
    chunks = list(state.text_iter(var_name="answer"))
    assert state.error() is None, state.error()  # the frontend's thread keeps the error instead of raising it
    assert len(chunks) > 1 and "".join(chunks) == state["answer"]
