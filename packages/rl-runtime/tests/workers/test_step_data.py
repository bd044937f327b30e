"""StepData validation, per-sample indexing for the coordinator, and stacking back."""

from __future__ import annotations

import pickle

import pytest
import torch

from rl_runtime.workers import StepData, StepDataError
from rl_runtime.workers._step_data import SampleBatch, stack_samples


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
