"""Validation of the request/response values and of weight-update metadata."""

from __future__ import annotations

import pytest
import torch

from rl_engines.rollout import (
    GenerateOutput,
    GenerateRequest,
    InvalidRequestError,
    SamplingParams,
    VersionSpan,
    WeightGroupSpec,
    WeightsMeta,
    check_requests,
    dtype_name,
    parse_dtype,
)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_new_tokens": 0}, "max_new_tokens must be an int >= 1"),
        ({"max_new_tokens": True}, "max_new_tokens must be an int >= 1"),
        ({"max_new_tokens": 4, "temperature": -0.1}, "temperature must be a finite float >= 0"),
        ({"max_new_tokens": 4, "temperature": float("inf")}, "temperature must be a finite float >= 0"),
        ({"max_new_tokens": 4, "top_p": 0.0}, r"top_p must be in \(0, 1\]"),
        ({"max_new_tokens": 4, "top_p": 1.5}, r"top_p must be in \(0, 1\]"),
        ({"max_new_tokens": 4, "top_k": 0}, "top_k must be -1"),
        ({"max_new_tokens": 4, "seed": -1}, "seed must be None or an int"),
        ({"max_new_tokens": 4, "seed": 2**63}, "seed must be None or an int"),
        ({"max_new_tokens": 4, "stop_token_ids": (1, -2)}, "non-negative int token ids"),
        ({"max_new_tokens": 4, "stop_token_ids": "ab"}, "sequence of token ids"),
    ],
)
def test_sampling_params_rejects(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidRequestError, match=match):
        SamplingParams(**kwargs)


def test_sampling_params_normalises() -> None:
    params = SamplingParams(max_new_tokens=3, temperature=0, stop_token_ids=[5, 6], ignore_eos=1)
    assert params.greedy and params.stop_token_ids == (5, 6) and params.ignore_eos is True
    assert isinstance(params.stop_token_ids, tuple)


@pytest.mark.parametrize(
    ("rid", "ids", "match"),
    [
        ("", (1,), "rid must be a non-empty str"),
        ("r", (), "empty prompt"),
        ("r", (1, -1), "non-negative int token ids"),
        ("r", (1, 2.0), "non-negative int token ids"),
    ],
)
def test_generate_request_rejects(rid: str, ids: tuple, match: str) -> None:
    with pytest.raises(InvalidRequestError, match=match):
        GenerateRequest(rid, ids, SamplingParams(max_new_tokens=1))


def test_generate_request_needs_sampling_params() -> None:
    with pytest.raises(InvalidRequestError, match="must be a SamplingParams"):
        GenerateRequest("r", (1,), {"max_new_tokens": 1})  # type: ignore[arg-type]


def test_check_requests_rejections() -> None:
    request = GenerateRequest("a", [1, 2], SamplingParams(max_new_tokens=1))
    assert request.input_ids == (1, 2)
    with pytest.raises(InvalidRequestError, match="empty request list"):
        check_requests([])
    with pytest.raises(InvalidRequestError, match="wrap a single request in a list"):
        check_requests(request)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="appears twice"):
        check_requests([request, request])
    with pytest.raises(InvalidRequestError, match="GenerateRequest items"):
        check_requests([request, "b"])  # type: ignore[list-item]


def test_generate_output_checks_lengths_and_spans() -> None:
    spans = (VersionSpan(1, 0, 2), VersionSpan(2, 2, 3))
    output = GenerateOutput("r", (1, 2, 3), (-0.1, -0.2, -0.3), "length", 2, 4, spans)
    assert output.versions == (1, 1, 2)
    with pytest.raises(InvalidRequestError, match="2 log-probs for 3 tokens"):
        GenerateOutput("r", (1, 2, 3), (-0.1, -0.2), "length", 1, 4)
    with pytest.raises(InvalidRequestError, match="finish_reason must be one of"):
        GenerateOutput("r", (), None, "eos", 1, 4)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="must tile the output"):
        GenerateOutput("r", (1, 2), None, "length", 1, 4, (VersionSpan(1, 1, 2),))
    with pytest.raises(InvalidRequestError, match="end at 1, not 2"):
        GenerateOutput("r", (1, 2), None, "length", 1, 4, (VersionSpan(1, 0, 1),))


def test_weights_meta_of_and_rejections() -> None:
    meta = WeightsMeta.of([("a", torch.zeros(2, 3, dtype=torch.bfloat16)), ("b", torch.zeros(4))])
    assert meta.names == ("a", "b") and meta.dtypes == ("bfloat16", "float32") and meta.shapes == ((2, 3), (4,))
    with pytest.raises(InvalidRequestError, match="names is empty"):
        WeightsMeta((), (), ())
    with pytest.raises(InvalidRequestError, match="one dtype and one shape per name"):
        WeightsMeta(("a",), ("float32", "float32"), ((1,),))
    with pytest.raises(InvalidRequestError, match="duplicates"):
        WeightsMeta(("a", "a"), ("float32", "float32"), ((1,), (1,)))
    with pytest.raises(InvalidRequestError, match="unknown dtype 'floaty'"):
        WeightsMeta(("a",), ("floaty",), ((1,),))
    with pytest.raises(InvalidRequestError, match="non-negative"):
        WeightsMeta(("a",), ("float32",), ((-1,),))


def test_dtype_names_round_trip() -> None:
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool):
        assert parse_dtype(dtype_name(dtype)) is dtype
    with pytest.raises(InvalidRequestError, match="unknown dtype 'Tensor'"):
        parse_dtype("Tensor")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"master_address": ""}, "master_address must be"),
        ({"master_port": 0}, "master_port must be in 1..65535"),
        ({"world_size": 1, "rank_offset": 1}, "world_size must be >= 2"),
        ({"rank_offset": 0}, "rank_offset must be in 1..world_size-1"),
        ({"rank_offset": 2}, "rank_offset must be in 1..world_size-1"),
        ({"backend": "mpi"}, "backend must be 'gloo'"),
        ({"timeout_s": 0}, "timeout_s must be > 0"),
    ],
)
def test_weight_group_spec_rejects(kwargs: dict, match: str) -> None:
    base = {"master_address": "127.0.0.1", "master_port": 29500, "rank_offset": 1, "world_size": 2}
    with pytest.raises(InvalidRequestError, match=match):
        WeightGroupSpec(**{**base, **kwargs})
