"""AReaL 1.0.4's SGLang backend (`areal.engine.sglang_remote.SGLangBackend`) against our server.

AReaL's own request builders make every body and its parser reads the generate answer; the requests are sent
with the key (AReaL's `RemoteInfEngine` transport, its workflow executor and its trainer processes are not
started). The distributed update follows AReaL's FSDP trainer: the init request in the background, the trainer
joins with `init_custom_process_group` at rank 0, then the update request and one broadcast per tensor.
"""

from __future__ import annotations

import datetime
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import torch.distributed as dist
from _clients import API_KEY, client_module
from _rollout_server import ServerProcess
from _sglang_trainer import InBackground, broadcast_all, init_custom_process_group

from rl_engines.sync import free_port
from rl_engines.testing import ConformanceModels, reference_greedy

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # AReaL's import-time warnings
PROMPT = [5, 17, 42, 9, 77]


def _send(server: ServerProcess, request: Any) -> httpx.Response:
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120.0) as http:
        if request.method == "GET":
            return http.get(request.endpoint)
        return http.post(request.endpoint, json=request.payload)


def _generate(server: ServerProcess) -> list[int]:
    remote = client_module("areal.engine.sglang_remote")
    io_struct, cli_args = client_module("areal.api.io_struct"), client_module("areal.api.cli_args")
    gconfig = cli_args.GenerationHyperparameters(max_new_tokens=4, greedy=True)
    backend = remote.SGLangBackend()
    request = backend.build_generation_request(io_struct.ModelRequest(input_ids=PROMPT, gconfig=gconfig), False, 0)
    answer = _send(server, request)
    assert answer.status_code == 200, answer.text
    result = backend.parse_generation_response(answer.json())
    assert result.stop_reason == "length" and len(result.output_logprobs) == 4
    return result.output_tokens


def test_generate_then_parse(server: ServerProcess, models: ConformanceModels) -> None:
    assert _generate(server) == reference_greedy(models.v1, PROMPT, 4)[0]


def test_pause_resume_offload_onload_health(server: ServerProcess, models: ConformanceModels) -> None:
    backend = client_module("areal.engine.sglang_remote").SGLangBackend()
    for request in (
        backend.get_pause_request(),
        backend.get_resume_request(),
        backend.get_offload_request(),
        backend.get_onload_request(),
        backend.get_offload_request(),
        backend.get_onload_request(tags=["weights", "kv_cache"]),
        backend.get_health_check_request(),
    ):
        answer = _send(server, request)
        assert answer.status_code == 200, (request.endpoint, answer.text)
    assert _generate(server) == reference_greedy(models.v1, PROMPT, 4)[0]


def test_distributed_weight_update(server: ServerProcess, models: ConformanceModels) -> None:
    backend = client_module("areal.engine.sglang_remote").SGLangBackend()
    param_spec = client_module("areal.api.io_struct").ParamSpec
    port, group_name = free_port(), "areal_update_weight_group"
    # The WeightUpdateMeta fields these two builders read (one server, tp 1, pp 1: world size 2).
    meta = SimpleNamespace(
        use_lora=False,
        nccl_master_address="127.0.0.1",
        nccl_master_port=port,
        nccl_group_name=group_name,
        gen_allocation=SimpleNamespace(parallel=SimpleNamespace(tp_size=1, pp_size=1, world_size=1)),
    )
    joining = InBackground(lambda: _send(server, backend.build_init_weights_group_request(server.url, 0, meta)))
    group = init_custom_process_group(
        backend="gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        world_size=2,
        rank=0,
        group_name=group_name,
        timeout=datetime.timedelta(seconds=60),
    )
    try:
        assert joining.result().json()["success"] is True
        named = list(models.state(2).items())
        specs = [param_spec(name, tuple(t.shape), str(t.dtype).split("torch.")[1]) for name, t in named]
        (update,) = backend.build_distributed_weight_update_requests(meta, specs).requests
        updating = InBackground(lambda: _send(server, update))
        broadcast_all(group, named)
        answer = updating.result()
        assert answer.status_code == 200 and answer.json()["success"] is True, answer.text
        assert _send(server, SimpleNamespace(method="POST", endpoint="/weights_checksum", payload={})).json()[
            "checksum"
        ] == models.checksum(models.state(2))
        assert _generate(server) == reference_greedy(models.v2, PROMPT, 4)[0]
    finally:
        dist.destroy_process_group(group)


def test_disk_weight_update(server: ServerProcess, models: ConformanceModels) -> None:
    backend = client_module("areal.engine.sglang_remote").SGLangBackend()
    for directory, model in ((models.v2_dir, models.v2), (models.v1_dir, models.v1)):
        meta = SimpleNamespace(use_lora=False, path=directory)  # the WeightUpdateMeta fields the builder reads
        (update,) = backend.build_disk_weight_update_requests(meta).requests
        answer = _send(server, update)
        assert answer.status_code == 200 and answer.json()["success"] is True, answer.text
        assert _generate(server) == reference_greedy(model, PROMPT, 4)[0]
