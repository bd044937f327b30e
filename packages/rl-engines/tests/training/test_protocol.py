"""`FSDPEngine` is a `TrainEngine` (the seam the roles in rl-runtime use)."""

from __future__ import annotations

from _training_helpers import engine_config

from rl_engines.training import FSDPEngine, TrainEngine


def test_fsdp_engine_satisfies_the_protocol() -> None:
    assert isinstance(FSDPEngine.from_config(engine_config()), TrainEngine)
