"""Up-front rejection of bad requests: every path with its message."""

from __future__ import annotations

import pickle

import pytest
import ray

from rl_coordinator import CoordinatorInputError, SampleInfo
from rl_coordinator.coordinator import DEFAULT_TIMEOUT_S, PutRequest, ReadRequest, RefSelection, StepSpec
from rl_coordinator.coordinator._requests import check_edge, check_timeout

INFO = SampleInfo("u0", 0, 1, 1)


def test_valid_spec_and_per_rank() -> None:
    assert StepSpec(4, 128).per_rank == 32
    assert StepSpec(2, 8, group_aware=True, group_size=4).per_rank == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dp_size": 0, "batch_size": 4}, r"dp_size must be an int >= 1, got 0"),
        ({"dp_size": 2, "batch_size": 0}, r"batch_size must be an int >= 1, got 0"),
        ({"dp_size": 2, "batch_size": 2.0}, r"batch_size must be an int >= 1, got 2.0"),
        ({"dp_size": 4, "batch_size": 6}, r"batch_size=6 cannot be split across dp_size=4 ranks; pass a multiple"),
        ({"dp_size": 2, "batch_size": 4, "balance": 1}, r"balance must be a bool, got 1"),
        ({"dp_size": 2, "batch_size": 4, "keep_batches": "yes"}, r"keep_batches must be a bool, got 'yes'"),
        ({"dp_size": 2, "batch_size": 4, "method": "kk"}, r"unknown method 'kk'.*valid names: karmarkar_karp, lpt"),
        ({"dp_size": 2, "batch_size": 4, "workload": "token"}, r"unknown workload 'token' \(did you mean 'tokens'\?\)"),
        ({"dp_size": 2, "batch_size": 4, "group_size": 2}, r"group_size needs group_aware=True"),
        ({"dp_size": 2, "batch_size": 4, "group_aware": True, "group_size": 0}, r"group_size must be an int >= 1"),
        ({"dp_size": 2, "batch_size": 6, "group_aware": True, "group_size": 4}, r"not a whole number of groups"),
        (
            {"dp_size": 2, "batch_size": 6, "group_aware": True, "group_size": 2},
            r"3 groups of 2 cannot be kept whole on dp_size=2 ranks.*or pass balance=False",
        ),
    ],
)
def test_bad_spec(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(CoordinatorInputError, match=message):
        StepSpec(**kwargs)  # type: ignore[arg-type]


def test_groups_that_do_not_divide_ranks_are_fine_without_balancing() -> None:
    assert StepSpec(2, 6, balance=False, group_aware=True, group_size=2).batch_size == 6


def test_read_request_by_hand() -> None:
    request = ReadRequest("rollout->train", 3, 1, StepSpec(2, 4))
    assert request.key == ("rollout->train", 3)
    assert request.wait_s() == DEFAULT_TIMEOUT_S and request.wait_s(7.0) == 7.0
    assert ReadRequest("e", 0, 0, StepSpec(1, 1), timeout_s=2).wait_s(7.0) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"edge_key": ""}, r"edge_key must be a non-empty string"),
        ({"step": True}, r"step must be an int >= 0, got True"),
        ({"step": -1}, r"step must be an int >= 0, got -1"),
        ({"dp_rank": -1}, r"dp_rank=-1 is outside dp_size=2; pass a rank in \[0, 1\]"),
        ({"dp_rank": 2}, r"dp_rank=2 is outside dp_size=2"),
        ({"spec": (2, 4)}, r"spec must be a StepSpec, got tuple; build one with StepSpec\(dp_size, batch_size\)"),
        ({"sample_filter": 3}, r"sample_filter must be a callable SampleInfo -> bool or None, got 3"),
        ({"timeout_s": float("inf")}, r"timeout_s must be a finite number of seconds > 0, got inf"),
        ({"timeout_s": -1}, r"timeout_s must be a finite number of seconds > 0, got -1"),
        ({"timeout_s": True}, r"timeout_s must be a finite number of seconds > 0, got True"),
        ({"wait_for_edge": 0}, r"wait_for_edge must be a bool, got 0"),
    ],
)
def test_bad_read_request(kwargs: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {"edge_key": "e", "step": 0, "dp_rank": 0, "spec": StepSpec(2, 4)} | kwargs
    with pytest.raises(CoordinatorInputError, match=message):
        ReadRequest(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("infos", "refs", "positions", "message"),
    [
        ([], [], None, r"infos must be a non-empty list of SampleInfo, got list"),
        ([INFO], "r", None, r"refs must be a list with one ref per sample \(1\), got str"),
        ([INFO], ["r"], None, r"refs\[0\] must be a ray.ObjectRef, got str; ray.put the payload and pass its ref"),
        ([INFO], ["r"], [0, 1], r"positions must be None or a list of 1 ints >= 0, got 2"),
    ],
)
def test_bad_put_request(infos: object, refs: object, positions: object, message: str) -> None:
    with pytest.raises(CoordinatorInputError, match=message):
        PutRequest("e", infos, refs, positions)  # type: ignore[arg-type]


def test_check_timeout() -> None:
    assert check_timeout(0.5) == 0.5
    with pytest.raises(CoordinatorInputError, match=r"timeout_s must be a finite number of seconds > 0, got '1'"):
        check_timeout("1")


def test_check_edge_returns_the_key() -> None:
    assert check_edge("rollout->train") == "rollout->train"
    with pytest.raises(CoordinatorInputError, match=r"edge_key must be a non-empty string, got 3"):
        check_edge(3)


def test_requests_and_replies_pickle_with_their_infos_as_columns(ray_runtime: None) -> None:
    infos = [INFO, SampleInfo("u1", 3, 2, 4, policy_version=1, edge="e", metadata={"reward": 0.5})]
    ref = ray.put([0, 1])
    for sent in (PutRequest("e", infos, [ref, ref], [0, 1]), RefSelection(infos, [ref, ref], [0, None])):
        for dumps in (pickle.dumps, ray.cloudpickle.dumps):
            back = pickle.loads(dumps(sent))
            assert type(back) is type(sent) and back == sent
            assert [dict(info.metadata) for info in back.infos] == [{}, {"reward": 0.5}]
            assert back.refs[0] is back.refs[1]  # a ref shared by samples is sent once
