"""The training engine: a `TrainEngine` protocol and its FSDP2 implementation (compute only: the RL roles
that own engines, with their losses, live in `rl_runtime.roles`).

A batch is a mapping of sample-schema tensors (`input_ids`, `attention_mask`, `response_mask`, ...); the
engine plans its own micro-batches (under `MicroBatchConfig.max_tokens_per_micro_batch`) and computes the
step's global `LossNormalizer` itself.
"""

from rl_engines.training._config import MicroBatchConfig, OffloadConfig, PrecisionConfig, TrainEngineConfig
from rl_engines.training._config_model import ModelConfig
from rl_engines.training._config_optim import OptimizerConfig, ScheduleConfig
from rl_engines.training._deferred_norm import NormalizedLoss
from rl_engines.training._engine import FSDPEngine
from rl_engines.training._errors import (
    BatchError,
    CheckpointError,
    CheckpointMismatchError,
    MicroBatchError,
    ModelSourceError,
    TrainConfigError,
)
from rl_engines.training._export import WeightBucket
from rl_engines.training._flops import estimate_train_flops, mfu, peak_flops
from rl_engines.training._model import load_hf_config
from rl_engines.training._protocol import TrainEngine
from rl_engines.training._types import (
    Batch,
    ForwardOutput,
    ForwardSpec,
    LossFn,
    LossOutput,
    RescalableLoss,
    StepResult,
)

__all__ = [
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
