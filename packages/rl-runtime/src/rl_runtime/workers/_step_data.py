"""StepData: what one node hands the next: a batch of named tensors, non-tensor extras and metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs
import torch

from rl_runtime.workers._errors import StepDataError


def _frozen(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


def _check_batch(instance: StepData, attribute: attrs.Attribute[Any], batch: Mapping[str, Any]) -> None:
    sizes = {}
    for name, tensor in batch.items():
        if not isinstance(tensor, torch.Tensor) or tensor.dim() == 0:
            raise StepDataError(
                f"StepData.batch[{name!r}] must be a tensor with samples on dim 0, got {type(tensor).__name__}"
                + (" of 0 dims" if isinstance(tensor, torch.Tensor) else "")
            )
        sizes[name] = tensor.shape[0]
    if len(set(sizes.values())) > 1:
        raise StepDataError(f"StepData.batch tensors disagree on the number of samples (dim 0): {sizes}")


def _check_metrics(instance: StepData, attribute: attrs.Attribute[Any], metrics: Mapping[str, Any]) -> None:
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise StepDataError(f"StepData.metrics[{name!r}] must be a number, got {type(value).__name__}")


@attrs.frozen
class StepData:
    """The output of a node: sample tensors keyed by the schema names, extras, and the node's metrics."""

    batch: Mapping[str, torch.Tensor] = attrs.field(factory=dict, converter=_frozen, validator=_check_batch)
    """Tensors keyed by sample-schema name (`input_ids`, `uid`, ...), every one with the samples on dim 0."""
    extras: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen)
    """Non-tensor data (prompt text, ground truth); to cross the coordinator each is a list with one item per
    sample."""
    metrics: Mapping[str, float] = attrs.field(factory=dict, converter=_frozen, validator=_check_metrics)
    """Numbers the node reports for this step; they reach the driver, the batch never does."""

    @property
    def num_samples(self) -> int:
        """Samples in the batch (0 for a batch with no tensors)."""
        return next((tensor.shape[0] for tensor in self.batch.values()), 0)

    def __reduce__(self) -> tuple[type[StepData], tuple[dict[str, Any], ...]]:
        # Mapping proxies do not pickle; Ray ships StepData between processes.
        return (StepData, (dict(self.batch), dict(self.extras), dict(self.metrics)))


@attrs.frozen
class Sample:
    """One sample of a StepData: its tensors (dim 0 removed) and its extras."""

    tensors: dict[str, torch.Tensor]
    extras: dict[str, Any]


class SampleBatch:
    """A StepData's batch and extras, indexable by sample, as the coordinator ships it (`payload[i]`)."""

    def __init__(self, data: StepData, where: str) -> None:
        n = data.num_samples
        for name, value in data.extras.items():
            if not isinstance(value, Sequence) or isinstance(value, (str, bytes)) or len(value) != n:
                raise StepDataError(
                    f"{where}: extras[{name!r}] must be a list with one item per sample ({n}) to go through the "
                    f"coordinator, got {type(value).__name__}; keep step-level values out of extras or repeat them"
                )
        self.tensors = dict(data.batch)
        self.extras = {name: list(value) for name, value in data.extras.items()}
        self._length = n

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> Sample:
        return Sample(
            {name: tensor[index] for name, tensor in self.tensors.items()},
            {name: values[index] for name, values in self.extras.items()},
        )


def stack_samples(samples: Sequence[Sample]) -> StepData:
    """One StepData from samples that share their tensor and extra names, in the given order."""
    if not samples:
        return StepData()
    names, extra_names = set(samples[0].tensors), set(samples[0].extras)
    for sample in samples:
        if set(sample.tensors) != names or set(sample.extras) != extra_names:
            raise StepDataError(
                f"samples disagree on their fields: {sorted(names)} / {sorted(extra_names)} vs "
                f"{sorted(sample.tensors)} / {sorted(sample.extras)}; every producer of an edge must emit the same keys"
            )
    batch = {name: torch.stack([sample.tensors[name] for sample in samples]) for name in samples[0].tensors}
    extras = {name: [sample.extras[name] for sample in samples] for name in samples[0].extras}
    return StepData(batch, extras)
