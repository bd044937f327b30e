"""sglang 0.5.23's `RuntimeEndpoint` (the `sglang.lang` frontend's backend) against our server, with a key."""

from __future__ import annotations

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
