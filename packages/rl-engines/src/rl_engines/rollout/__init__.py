"""Rollout engines: the `InferenceEngine` protocol, its value types, and `HFEngine` (in-process transformers).

Entry points: `InferenceEngine` (protocol), `HFEngine` / `HFEngineConfig`, the builders a trainer can call by
name (`ROLLOUT_ENGINES`, `register_rollout_engine`, `build_rollout_engine`, `RolloutEngineSpec`), `GenerateRequest` /
`SamplingParams` / `GenerateOutput`, the weight-update values (`WeightsMeta`, `WeightGroupSpec`,
`SharedTensorBucket`) and `weights_checksum`, which trainer and engine both compute to prove a sync.
"""

from rl_engines.rollout._builders import ENGINE_EXTRAS, missing_engine_extra
from rl_engines.rollout._checksum import tensor_checksum, weights_checksum
from rl_engines.rollout._errors import (
    EngineAsleepError,
    EngineShutdownError,
    EngineStateError,
    EngineTimeoutError,
    InvalidRequestError,
    ParameterShapeError,
    PromptTooLongError,
    RolloutError,
    UnknownParameterError,
    UnversionedWeightsError,
    WeightsNotLoadedError,
    WeightUpdateError,
)
from rl_engines.rollout._gate import RequestGate, Ticket
from rl_engines.rollout._handles import SLOT_ALIGNMENT, SharedTensorBucket, TensorSlot, open_shared_bucket
from rl_engines.rollout._hf_build import build_hf_engine, hf_engine_config
from rl_engines.rollout._hf_config import HFEngineConfig
from rl_engines.rollout._hf_engine import HFEngine
from rl_engines.rollout._hf_scoring import TokenScores
from rl_engines.rollout._hf_weights import safetensors_files
from rl_engines.rollout._protocol import Capability, InferenceEngine
from rl_engines.rollout._registry import (
    ROLLOUT_ENGINES,
    RolloutEngineBuilder,
    RolloutEngineSpec,
    build_rollout_engine,
    register_rollout_engine,
)
from rl_engines.rollout._types import (
    SLEEP_TAGS,
    EngineState,
    EngineStatus,
    FinishReason,
    GenerateOutput,
    GenerateRequest,
    LogprobMode,
    PauseMode,
    SamplingParams,
    TokenCallback,
    VersionSpan,
    check_requests,
)
from rl_engines.rollout._weight_group import WeightGroup
from rl_engines.rollout._weight_types import (
    DEFAULT_GROUP_NAME,
    NamedTensors,
    WeightGroupSpec,
    WeightsMeta,
    dtype_name,
    parse_dtype,
)

__all__ = [
    "DEFAULT_GROUP_NAME",
    "ENGINE_EXTRAS",
    "ROLLOUT_ENGINES",
    "SLEEP_TAGS",
    "SLOT_ALIGNMENT",
    "Capability",
    "EngineAsleepError",
    "EngineShutdownError",
    "EngineState",
    "EngineStateError",
    "EngineStatus",
    "EngineTimeoutError",
    "FinishReason",
    "GenerateOutput",
    "GenerateRequest",
    "HFEngine",
    "HFEngineConfig",
    "InferenceEngine",
    "InvalidRequestError",
    "LogprobMode",
    "NamedTensors",
    "ParameterShapeError",
    "PauseMode",
    "PromptTooLongError",
    "RequestGate",
    "RolloutEngineBuilder",
    "RolloutEngineSpec",
    "RolloutError",
    "SamplingParams",
    "SharedTensorBucket",
    "TensorSlot",
    "Ticket",
    "TokenCallback",
    "TokenScores",
    "UnknownParameterError",
    "UnversionedWeightsError",
    "VersionSpan",
    "WeightGroup",
    "WeightGroupSpec",
    "WeightUpdateError",
    "WeightsMeta",
    "WeightsNotLoadedError",
    "build_hf_engine",
    "build_rollout_engine",
    "check_requests",
    "dtype_name",
    "hf_engine_config",
    "missing_engine_extra",
    "open_shared_bucket",
    "parse_dtype",
    "register_rollout_engine",
    "safetensors_files",
    "tensor_checksum",
    "weights_checksum",
]
