"""The wire format on its own: /generate JSON both ways, typed errors over HTTP, tensor handles."""

from __future__ import annotations

import base64
import os
import pickle
import subprocess
import sys

import pytest
import torch

from rl_engines.remote import (
    PayloadTooLargeError,
    ProtocolError,
    RemoteEngineConfig,
    deserialize_named_tensors,
    error_from_response,
    generate_output_json,
    generate_payload,
    output_from_json,
    parse_generate_payload,
    serialize_named_tensors,
    status_for,
)
from rl_engines.rollout import (
    EngineAsleepError,
    EngineStateError,
    EngineTimeoutError,
    GenerateOutput,
    GenerateRequest,
    InvalidRequestError,
    ParameterShapeError,
    SamplingParams,
    UnknownParameterError,
    VersionSpan,
    WeightUpdateError,
)

REQUEST = GenerateRequest("r", (1, 2, 3), SamplingParams(max_new_tokens=4, temperature=0.5, top_k=7, seed=3))


def test_generate_payload_round_trips() -> None:
    requests, batch, stream = parse_generate_payload(generate_payload([REQUEST], stream=True))
    assert requests == [REQUEST] and batch and stream


def test_single_form_and_sglang_defaults() -> None:
    sglang_top_k_all = 1 << 30
    body = {"input_ids": [4, 5], "sampling_params": {"max_new_tokens": 2, "top_k": sglang_top_k_all}, "rid": "x"}
    (request,), batch, stream = parse_generate_payload(body)
    assert not batch and not stream and request.rid == "x" and request.sampling.top_k == -1


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"input_ids": [1], "sampling_params": {"max_new_tokens": 2}, "text": "hi"}, "text='hi' is not supported"),
        ({"input_ids": [1], "sampling_params": {"max_new_tokens": 2}, "retrun_logprob": True}, "'return_logprob'"),
        ({"input_ids": [1], "sampling_params": {}}, "max_new_tokens is required"),
        ({"input_ids": [1], "sampling_params": {"max_new_tokens": 2, "n": 2}}, "n=2 is not supported"),
        ({"input_ids": [[1], [2]], "sampling_params": {"max_new_tokens": 2}, "rid": "a"}, "rid as a list"),
        ({"input_ids": [[1], [2]], "sampling_params": [{"max_new_tokens": 2}]}, "1 entries for 2 prompts"),
        ({"input_ids": []}, "non-empty list"),
        ({"input_ids": [1, -2], "sampling_params": {"max_new_tokens": 2}}, "non-negative int token ids"),
    ],
)
def test_bad_generate_bodies_name_the_field(body: dict, match: str) -> None:
    with pytest.raises(InvalidRequestError, match=match):
        parse_generate_payload(body)


def test_output_round_trips_with_version_spans() -> None:
    output = GenerateOutput(
        "r", (9, 8, 7), (-0.5, -1.0, -2.0), "stop", 2, 3, (VersionSpan(1, 0, 1), VersionSpan(2, 1, 3))
    )
    data = generate_output_json(output)
    assert data["meta_info"]["finish_reason"] == {"type": "stop", "matched": 7}
    assert output_from_json(data, REQUEST) == output


def test_sglang_output_without_our_fields_parses() -> None:
    data = {
        "text": "",
        "output_ids": [9, 8],
        "meta_info": {
            "id": "r",
            "finish_reason": {"type": "length", "length": 2},
            "prompt_tokens": 3,
            "weight_version": "0",
            "output_token_logprobs": [[-0.1, 9, None], [-0.2, 8, None]],
        },
    }
    output = output_from_json(data, REQUEST)
    assert output.output_logprobs == (-0.1, -0.2) and output.version_spans == () and output.weight_version == 0
    data["meta_info"]["output_token_logprobs"][1][1] = 5
    with pytest.raises(ProtocolError, match="do not match"):
        output_from_json(data, REQUEST)
    with pytest.raises(ProtocolError, match="malformed"):
        output_from_json({"output_ids": [1]}, REQUEST)


def test_a_version_that_spells_no_int_is_a_protocol_error() -> None:
    # SGLang's default label is "default"; our engines and the runtime count policy versions as ints.
    data = {
        "output_ids": [9],
        "meta_info": {
            "id": "r",
            "finish_reason": {"type": "length", "length": 1},
            "weight_version": "default",
            "output_token_logprobs": [[-0.1, 9, None]],
        },
    }
    with pytest.raises(ProtocolError, match=r"weight_version must spell a weight version.*--weight-version 0"):
        output_from_json(data, REQUEST)
    data["meta_info"]["weight_version"] = "7"
    assert output_from_json(data, REQUEST).weight_version == 7


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (PayloadTooLargeError("x"), 413),
        (UnknownParameterError("x"), 400),
        (InvalidRequestError("x"), 400),
        (EngineAsleepError("x"), 503),
        (EngineStateError("x"), 409),
        (EngineTimeoutError("x"), 504),
        (RuntimeError("x"), 500),
    ],
)
def test_errors_cross_the_wire_with_their_class(error: Exception, status: int) -> None:
    assert status_for(error) == status
    if isinstance(error, RuntimeError):
        return
    body = {"error": {"message": "boom", "type": type(error).__name__}}
    rebuilt = error_from_response(status, body, "POST /x")
    assert type(rebuilt) is type(error) and "boom" in str(rebuilt) and f"HTTP {status}" in str(rebuilt)


def test_sglang_bodies_map_by_status() -> None:
    weights = error_from_response(400, {"success": False, "message": "bad name"}, "POST /u", weights=True)
    assert type(weights) is WeightUpdateError and "bad name" in str(weights)
    shape = error_from_response(400, {"success": False, "message": "m", "error_type": "ParameterShapeError"}, "u")
    assert type(shape) is ParameterShapeError
    assert type(error_from_response(400, "Cache not flushed", "POST /flush_cache")) is InvalidRequestError
    assert type(error_from_response(503, "", "GET /x")) is EngineStateError


def test_config_rejects_bad_values() -> None:
    with pytest.raises(InvalidRequestError, match="http://host:port"):
        RemoteEngineConfig("localhost:30000")
    with pytest.raises(InvalidRequestError, match="timeout_s must be > 0"):
        RemoteEngineConfig("http://127.0.0.1:1", timeout_s=0)
    assert RemoteEngineConfig("http://127.0.0.1:1/").base_url == "http://127.0.0.1:1"


def test_tensor_handles_are_zero_copy_across_processes(tmp_path) -> None:
    weight = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    half = torch.ones(5, dtype=torch.bfloat16)
    payload = serialize_named_tensors([("w", weight), ("h", half), ("row", weight[1])])
    (tmp_path / "payload").write_text(payload)
    child = f"""
import sys
from rl_engines.remote import deserialize_named_tensors
named = deserialize_named_tensors(open({str(tmp_path / "payload")!r}).read())
print([(n, str(t.dtype), list(t.shape), t.float().sum().item()) for n, t in named])
named[0][1][0, 0] = 100.0
"""
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True, env=os.environ)
    assert result.stdout.strip() == str(
        [("w", "torch.float32", [3, 4], 66.0), ("h", "torch.bfloat16", [5], 5.0), ("row", "torch.float32", [4], 22.0)]
    )
    assert weight[0, 0].item() == 100.0  # the child wrote into our memory: no copy was made


def test_hostile_payloads_are_refused_without_running_them(tmp_path) -> None:
    marker = tmp_path / "pwned"
    evil = base64.b64encode(pickle.dumps(_Evil(str(marker)))).decode()
    with pytest.raises(InvalidRequestError, match=r"not a tensor-rebuilding function"):
        deserialize_named_tensors(evil)
    assert not marker.exists()
    with pytest.raises(InvalidRequestError, match="base64"):
        deserialize_named_tensors("%%%")
    with pytest.raises(InvalidRequestError, match="list of"):
        deserialize_named_tensors(base64.b64encode(pickle.dumps({"a": 1})).decode())


def test_a_file_descriptor_handle_is_refused_naming_the_sharing_strategy() -> None:
    payload = base64.b64encode(pickle.dumps(_ByFileDescriptor())).decode()
    with pytest.raises(InvalidRequestError, match=r"rebuild_storage_fd.*set_sharing_strategy\('file_system'\)"):
        deserialize_named_tensors(payload)


class _ByFileDescriptor:
    """Pickles as torch's `file_descriptor` strategy pickles a CPU storage (never rebuilt here)."""

    def __reduce__(self) -> tuple:
        from torch.multiprocessing.reductions import rebuild_storage_fd

        return (rebuild_storage_fd, (torch.UntypedStorage, 0, 0))


class _Evil:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (os.system, (f"touch {self.path}",))
