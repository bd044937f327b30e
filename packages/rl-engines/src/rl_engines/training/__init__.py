"""The training engine: a `TrainEngine` protocol, its FSDP2 implementation, and the actor, critic and
reference roles composed around an engine.

A batch is a mapping of sample-schema tensors (`input_ids`, `attention_mask`, `response_mask`, ...); the
caller plans the micro-batches (row indices under `MicroBatchConfig.max_tokens_per_micro_batch`) and
passes the step's global `LossNormalizer` (`TrainEngine.global_normalizer`).
"""

from rl_engines.training._config import (
    MicroBatchConfig,
    ModelConfig,
    OffloadConfig,
    OptimizerConfig,
    PrecisionConfig,
    ScheduleConfig,
    TrainEngineConfig,
)
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
from rl_engines.training._roles import (
    ActorConfig,
    ActorRole,
    CriticConfig,
    CriticRole,
    ReferenceConfig,
    ReferenceRole,
)
from rl_engines.training._types import Batch, ForwardOutput, ForwardSpec, LossFn, LossOutput, MiniBatch, StepResult

__all__ = [
    "ActorConfig",
    "ActorRole",
    "Batch",
    "BatchError",
    "CheckpointError",
    "CheckpointMismatchError",
    "CriticConfig",
    "CriticRole",
    "FSDPEngine",
    "ForwardOutput",
    "ForwardSpec",
    "LossFn",
    "LossOutput",
    "MicroBatchConfig",
    "MicroBatchError",
    "MiniBatch",
    "ModelConfig",
    "ModelSourceError",
    "OffloadConfig",
    "OptimizerConfig",
    "PrecisionConfig",
    "ReferenceConfig",
    "ReferenceRole",
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
