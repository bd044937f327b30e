"""SampleInfo: its checks, and the pickling that ships it between processes without re-checking."""

from __future__ import annotations

import pickle

import pytest

from rl_coordinator import CoordinatorInputError, SampleInfo
from rl_coordinator._sample_info import pack_infos, unpack_infos


def test_pickle_round_trip_keeps_every_field_and_read_only_metadata() -> None:
    info = SampleInfo("u1", 7, 3, 5, policy_version=2, edge="a->b", source_dp_size=4, metadata={"reward": 1.5})
    back = pickle.loads(pickle.dumps(info))
    assert back == info and hash(back) == hash(info)
    assert (back.policy_version, back.edge, back.source_dp_size, back.total_tokens) == (2, "a->b", 4, 8)
    assert dict(back.metadata) == {"reward": 1.5}
    with pytest.raises(TypeError):
        back.metadata["reward"] = 0.0  # type: ignore[index]


def test_unpickled_infos_without_metadata_share_one_empty_mapping() -> None:
    first, second = pickle.loads(pickle.dumps([SampleInfo("a", 0, 1, 1), SampleInfo("b", 0, 1, 1)]))
    assert dict(first.metadata) == {} and first.metadata is second.metadata


def test_infos_packed_as_columns_come_back_field_for_field() -> None:
    infos = [
        SampleInfo("u1", 7, 3, 5, policy_version=2, edge="a->b", source_dp_size=4, metadata={"reward": 1.5}),
        SampleInfo("u2", 8, 1, 0),
    ]
    back = unpack_infos(pickle.loads(pickle.dumps(pack_infos(infos))))
    assert back == infos
    assert [vars(info) | {"metadata": dict(info.metadata)} for info in back] == [
        vars(info) | {"metadata": dict(info.metadata)} for info in infos
    ]
    with pytest.raises(TypeError):
        back[0].metadata["reward"] = 0.0  # type: ignore[index]
    assert unpack_infos(pack_infos([])) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"uid": ""}, r"SampleInfo.uid must be a non-empty string, got ''"),
        ({"prompt_tokens": -1}, r"SampleInfo.prompt_tokens must be an int >= 0, got -1 \(uid u\)"),
        ({"response_tokens": 1.5}, r"SampleInfo.response_tokens must be an int >= 0, got 1.5"),
        ({"policy_version": -2}, r"SampleInfo.policy_version must be an int >= 0, got -2"),
        ({"prompt_tokens": 0, "response_tokens": 0}, r"SampleInfo for uid u has zero tokens"),
        ({"source_dp_size": 0}, r"SampleInfo.source_dp_size must be an int >= 1, got 0"),
    ],
)
def test_rejections(kwargs: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {"uid": "u", "group_id": 0, "prompt_tokens": 1, "response_tokens": 1} | kwargs
    with pytest.raises(CoordinatorInputError, match=message):
        SampleInfo(**fields)  # type: ignore[arg-type]
