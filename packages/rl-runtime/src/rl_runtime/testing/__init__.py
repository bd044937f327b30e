"""Test doubles shipped with rl-runtime: the embodied seam without a simulator or a VLA, and a metrics sink that
signals its own run at a chosen step (kill-and-resume tests decided by the run's events, not by timing)."""

from rl_runtime.testing._embodied import (
    LAST_FRAME,
    TOY_ENV,
    LastFrameEmbedder,
    RandomPolicy,
    WordTask,
    register_embodied_doubles,
)
from rl_runtime.testing._signal_sink import SIGNAL_AT_STEP, SignalAtStep, register_signal_at_step, run_signalled

__all__ = [
    "LAST_FRAME",
    "SIGNAL_AT_STEP",
    "TOY_ENV",
    "LastFrameEmbedder",
    "RandomPolicy",
    "SignalAtStep",
    "WordTask",
    "register_embodied_doubles",
    "register_signal_at_step",
    "run_signalled",
]
