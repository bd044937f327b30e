"""The `tensorboard` sink: scalars through torch's `SummaryWriter` into `run_dir/tensorboard`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl_runtime.metrics._sink import SINK_EXTRAS, SinkContext, import_extra, register_sink

_PACKAGE = "tensorboard"
_EXTRA = "tensorboard"
"""The package this sink imports when built, and the rl-runtime extra that provides it."""
SINK_EXTRAS["tensorboard"] = (_PACKAGE, _EXTRA)

TENSORBOARD_DIR_NAME = "tensorboard"


class TensorboardSink:
    """Writes every metric as a scalar at its step and flushes each step, so a crash loses nothing logged."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Add each metric as a scalar at `step`."""
        for name, value in metrics.items():
            self._writer.add_scalar(name, value, global_step=step)
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self._writer.close()


@register_sink("tensorboard")
def tensorboard_sink(context: SinkContext) -> TensorboardSink:
    """A `TensorboardSink` writing `run_dir/tensorboard`; a resumed run hides events from its discarded steps."""
    # torch.utils.tensorboard needs the tensorboard package; check for it first so the error names the extra.
    import_extra(_PACKAGE, "tensorboard", _EXTRA)
    summary = import_extra("torch.utils.tensorboard", "tensorboard", "tensorboard")
    # purge_step makes TensorBoard drop events at or after the resume step that an interrupted run wrote.
    purge_step = context.start_step + 1 if context.start_step > 0 else None
    return TensorboardSink(
        summary.SummaryWriter(log_dir=str(context.run_dir / TENSORBOARD_DIR_NAME), purge_step=purge_step)
    )
