"""StepData validation, per-sample indexing for the coordinator, and stacking back."""

from __future__ import annotations

import pickle

import pytest
import torch

from rl_runtime.workers import StepData, StepDataError
from rl_runtime.workers._step_data import SampleBatch, check_node_output, stack_samples


def _data() -> StepData:
    batch = {"uid": torch.tensor([7, 8, 9]), "values": torch.arange(6.0).reshape(3, 2)}
    return StepData(batch, {"text": ["a", "b", "c"]}, {"m": 1.5})


def test_num_samples_and_pickle_round_trip() -> None:
    data = _data()
    assert data.num_samples == 3 and StepData().num_samples == 0
    back = pickle.loads(pickle.dumps(data))
    assert torch.equal(back.batch["values"], data.batch["values"]) and back.extras["text"] == ["a", "b", "c"]
    assert dict(back.metrics) == {"m": 1.5}


def test_sample_batch_indexes_and_stack_restores_order() -> None:
    payload = SampleBatch(_data(), "node 'x'")
    assert len(payload) == 3
    second = payload[1]
    assert second.tensors["uid"].item() == 8 and second.tensors["values"].tolist() == [2.0, 3.0]
    assert second.extras == {"text": "b"}
    back = stack_samples([payload[2], payload[0]])
    assert back.batch["uid"].tolist() == [9, 7] and back.batch["values"].tolist() == [[4.0, 5.0], [0.0, 1.0]]
    assert back.extras["text"] == ["c", "a"]
    assert stack_samples([]).num_samples == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"batch": {"a": torch.zeros(2), "b": torch.zeros(3)}}, r"disagree on the number of samples"),
        ({"batch": {"a": [1, 2]}}, r"batch\['a'\] must be a tensor with samples on dim 0, got list"),
        ({"batch": {"a": torch.tensor(1.0)}}, r"got Tensor of 0 dims"),
        ({"metrics": {"loss": "high"}}, r"metrics\['loss'\] must be a number, got str"),
        ({"metrics": {"flag": True}}, r"metrics\['flag'\] must be a number, got bool"),
    ],
)
def test_rejects_malformed_step_data(kwargs: dict, match: str) -> None:
    with pytest.raises(StepDataError, match=match):
        StepData(**kwargs)


def test_step_level_extras_cannot_cross_the_coordinator() -> None:
    data = StepData({"uid": torch.tensor([1, 2])}, {"temperature": 0.7})
    with pytest.raises(StepDataError, match=r"node 'gen': extras\['temperature'\] must be a list with one item per"):
        SampleBatch(data, "node 'gen'")


def test_stack_rejects_samples_with_different_fields() -> None:
    a = SampleBatch(StepData({"uid": torch.tensor([1])}), "a")[0]
    b = SampleBatch(StepData({"uid": torch.tensor([2]), "x": torch.tensor([0])}), "b")[0]
    with pytest.raises(StepDataError, match=r"samples disagree on their fields"):
        stack_samples([a, b])


def _rollout(width: int = 4) -> StepData:
    return StepData({"input_ids": torch.zeros(3, width, dtype=torch.int64), "uid": torch.tensor([7, 8, 9])})


def test_a_node_output_is_checked_against_the_schema_where_it_was_made() -> None:
    rollout = _rollout()
    ok = StepData({**rollout.batch, "advantages": torch.zeros(3, 4), "not_in_schema": torch.zeros(3, 1, 1)})
    check_node_output(ok, {"rollout": rollout}, "node 'adv'")  # new fields fit; unknown names are skipped
    with pytest.raises(StepDataError, match=r"node 'adv': sample field 'advantages' must have dtype torch\.float32"):
        check_node_output(
            StepData({**rollout.batch, "advantages": torch.zeros(3, 4, dtype=torch.int64)}), {}, "node 'adv'"
        )
    # A made tensor's T must agree with the passed-on input_ids.
    with pytest.raises(StepDataError, match=r"node 'adv': advantages must have shape \(B, T\) with T=4"):
        check_node_output(
            StepData({**rollout.batch, "advantages": torch.zeros(3, 5)}), {"rollout": rollout}, "node 'adv'"
        )
    with pytest.raises(StepDataError, match=r"node 'ids': uid must have shape \(B\), got \(3, 2\)"):
        check_node_output(StepData({"uid": torch.zeros(3, 2, dtype=torch.int64)}), {}, "node 'ids'")


def test_tensors_passed_on_unchanged_are_not_checked_again() -> None:
    odd = StepData({"uid": torch.zeros(3, 2, dtype=torch.int64)})  # made off-schema upstream (checked there)
    check_node_output(StepData(dict(odd.batch)), {"upstream": odd}, "node 'pass'")
