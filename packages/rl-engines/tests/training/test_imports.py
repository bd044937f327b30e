"""The training subpackage's public names are pinned (the layer rules are import-linter's, in `nox -s lint`)."""

from __future__ import annotations

import rl_engines.training as training

PUBLIC_API = [
    "Batch",
    "BatchError",
    "CheckpointError",
    "CheckpointMismatchError",
    "FSDPEngine",
    "ForwardOutput",
    "ForwardSpec",
    "LossFn",
    "LossOutput",
    "MicroBatchConfig",
    "MicroBatchError",
    "ModelConfig",
    "ModelSourceError",
    "NormalizedLoss",
    "OffloadConfig",
    "OptimizerConfig",
    "PrecisionConfig",
    "RescalableLoss",
    "ScheduleConfig",
    "StepResult",
    "TrainConfigError",
    "TrainEngine",
    "TrainEngineConfig",
    "WeightBucket",
    "estimate_train_flops",
    "load_hf_config",
    "mfu",
    "peak_flops",
]


def test_public_api_is_pinned() -> None:
    assert sorted(training.__all__) == sorted(PUBLIC_API)
    assert all(hasattr(training, name) for name in PUBLIC_API)


def test_errors_are_engine_errors_and_value_errors_where_input_is_bad() -> None:
    from rl_engines import EngineError

    for error in (training.TrainConfigError, training.ModelSourceError, training.MicroBatchError, training.BatchError):
        assert issubclass(error, EngineError) and issubclass(error, ValueError)
    assert issubclass(training.CheckpointMismatchError, training.CheckpointError)
    assert issubclass(training.CheckpointError, EngineError)
