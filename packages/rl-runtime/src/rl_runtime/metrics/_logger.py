"""`MetricsLogger`: fans each step's metrics out to every configured sink, isolating their failures."""

from __future__ import annotations

import logging
import numbers
from collections.abc import Mapping, Sequence
from types import TracebackType

import torch

from rl_runtime.metrics._errors import MetricsError
from rl_runtime.metrics._sink import MetricSink, SinkContext, build_sink

logger = logging.getLogger(__name__)


def _as_number(name: str, value: object) -> float:
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise MetricsError(f"metric {name!r} must be a scalar, got a tensor of shape {tuple(value.shape)}")
        return float(value.item())
    if isinstance(value, numbers.Real):  # int, float, bool, numpy scalars
        return float(value)
    raise MetricsError(f"metric {name!r} must be a number or a one-element tensor, got {type(value).__name__}")


class MetricsLogger:
    """Writes each step's metrics to every sink and closes them all.

    A sink that raises is disabled with its reason (in `disabled`), logged once with its traceback, and the
    other sinks carry on; the step is never lost to them. Use as a context manager or call `close`.
    """

    def __init__(self, sinks: Mapping[str, MetricSink]) -> None:
        self._sinks: dict[str, MetricSink] = dict(sinks)
        self.disabled: dict[str, str] = {}
        """Sinks taken out after a failure, by name, with the reason."""

    @classmethod
    def from_names(cls, names: Sequence[str], context: SinkContext) -> MetricsLogger:
        """A logger over the registered sinks `names`, built for `context`.

        An unknown name or a missing optional package raises before anything is logged; sinks already built
        are closed first.
        """
        sinks: dict[str, MetricSink] = {}
        try:
            for name in dict.fromkeys(names):
                sinks[name] = build_sink(name, context)
        except BaseException:
            cls(sinks).close()
            raise
        return cls(sinks)

    @property
    def active(self) -> tuple[str, ...]:
        """Names of the sinks still receiving metrics."""
        return tuple(self._sinks)

    def _disable(self, name: str, action: str, exc: Exception) -> None:
        reason = f"{action} failed: {type(exc).__name__}: {exc}"
        self.disabled[name] = reason
        del self._sinks[name]
        logger.error("metrics sink %r is disabled: %s", name, reason, exc_info=exc)

    def log(self, step: int, metrics: Mapping[str, object]) -> None:
        """Send `metrics` (numbers or one-element tensors) of `step` to every active sink."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise MetricsError(f"step must be an int >= 0, got {step!r}")
        values = {name: _as_number(name, value) for name, value in metrics.items()}
        for name, sink in list(self._sinks.items()):
            try:
                sink.log(step, values)
            except Exception as exc:  # one sink's failure must not cost the others this step
                self._disable(name, f"logging step {step}", exc)

    def close(self) -> None:
        """Close every active sink; a sink that fails to close is logged and the rest still close."""
        for name, sink in list(self._sinks.items()):
            try:
                sink.close()
            except Exception as exc:  # the remaining sinks must still flush
                self._disable(name, "closing", exc)
            else:
                del self._sinks[name]

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
