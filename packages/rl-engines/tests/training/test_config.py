"""Every engine setting's validation, and the layout it resolves to in one CPU process."""

from __future__ import annotations

import math

import pytest
import torch
from _training_helpers import qwen_config

from rl_engines.training import (
    MicroBatchConfig,
    ModelConfig,
    OffloadConfig,
    OptimizerConfig,
    PrecisionConfig,
    ScheduleConfig,
    TrainConfigError,
    TrainEngineConfig,
    load_hf_config,
)
from rl_engines.training._fsdp import resolve_layout
from rl_engines.training._optim import lr_multiplier


def _model(**kwargs) -> ModelConfig:
    return ModelConfig(hf_config=qwen_config(), **kwargs)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: PrecisionConfig(param_dtype="fp32"), r"param_dtype='fp32' is not one of"),
        (lambda: PrecisionConfig(compute_dtype="half"), r"compute_dtype='half' is not one of"),
        (lambda: OptimizerConfig(lr=0.0), r"OptimizerConfig\.lr must be a finite number > 0"),
        (lambda: OptimizerConfig(lr=math.inf), r"OptimizerConfig\.lr must be a finite number > 0"),
        (lambda: OptimizerConfig(eps=-1.0), r"OptimizerConfig\.eps must be"),
        (lambda: OptimizerConfig(weight_decay=-0.1), r"OptimizerConfig\.weight_decay must be a finite number >= 0"),
        (lambda: OptimizerConfig(betas=(0.9, 1.0)), r"OptimizerConfig\.betas must be two numbers in \[0, 1\)"),
        (lambda: OptimizerConfig(max_grad_norm=0.0), r"OptimizerConfig\.max_grad_norm must be"),
        (lambda: ScheduleConfig(kind="linear"), r"ScheduleConfig\.kind='linear' is not one of"),
        (lambda: ScheduleConfig(warmup_steps=-1), r"ScheduleConfig\.warmup_steps must be >= 0"),
        (lambda: ScheduleConfig(min_lr_ratio=1.5), r"ScheduleConfig\.min_lr_ratio must lie in \[0, 1\]"),
        (
            lambda: lr_multiplier(ScheduleConfig(kind="cosine")),
            r"needs total_steps > warmup_steps=0, got total_steps=None",
        ),
        (lambda: ScheduleConfig(kind="cosine", warmup_steps=5, total_steps=5), r"total_steps > warmup_steps=5"),
        (lambda: MicroBatchConfig(max_tokens_per_micro_batch=0), r"max_tokens_per_micro_batch must be an int > 0"),
        (lambda: MicroBatchConfig(logprob_chunk_size=1.5), r"logprob_chunk_size must be an int > 0"),
        (lambda: TrainEngineConfig(model=_model(), device="tpu"), r"device must be 'auto', 'cpu' or 'cuda'"),
        (lambda: MicroBatchConfig(packing="yes"), r"packing must be True, False or 'auto', got 'yes'"),
        (
            lambda: TrainEngineConfig(
                model=_model(attn_implementation="paged|eager"), micro_batch=MicroBatchConfig(packing=True)
            ),
            r"packing=True needs an attention implementation .* got ModelConfig\.attn_implementation='paged\|eager'",
        ),
    ],
)
def test_invalid_settings_are_named(make, message: str) -> None:
    with pytest.raises(TrainConfigError, match=message):
        make()


def test_an_attention_implementation_transformers_lacks_is_refused_with_the_nearest() -> None:
    # transformers refuses it only when the engine builds the model, in the worker.
    with pytest.raises(
        TrainConfigError,
        match=r"attn_implementation must be an attention implementation transformers "
        r"knows \(eager, .*sdpa.*\) or a Hub kernel \(org/repo\), got 'spda'; did you mean 'sdpa'\?",
    ):
        _model(attn_implementation="spda")
    for name in ("eager", "sdpa", "flex_attention", "flash_attention_2", "paged|eager", "kernels-community/flash-attn"):
        assert _model(attn_implementation=name).attn_implementation == name


def test_padded_rows_allow_any_attention_implementation() -> None:
    config = TrainEngineConfig(
        model=_model(attn_implementation="paged|eager"), micro_batch=MicroBatchConfig(packing=False)
    )
    assert not config.packing


@pytest.mark.parametrize(
    ("attn_implementation", "packing", "expected"),
    [
        ("sdpa", "auto", False),
        ("eager", "auto", False),
        ("paged|eager", "auto", False),
        ("flash_attention_2", "auto", True),
        ("flash_attention_3", "auto", True),
        ("sdpa", True, True),
        ("flash_attention_2", False, False),
    ],
)
def test_auto_packing_follows_the_attention_kernel(attn_implementation: str, packing, expected: bool) -> None:
    model = _model(attn_implementation=attn_implementation)
    config = TrainEngineConfig(model=model, micro_batch=MicroBatchConfig(packing=packing))
    assert config.packing is expected


def test_precision_dtypes() -> None:
    precision = PrecisionConfig(param_dtype="float32", compute_dtype="bfloat16")
    assert (precision.param, precision.compute, precision.reduce) == (torch.float32, torch.bfloat16, torch.float32)
    assert PrecisionConfig(param_dtype="bfloat16").compute == torch.bfloat16


def test_one_cpu_process_is_unsharded() -> None:
    layout = resolve_layout(TrainEngineConfig(model=_model(), device="cpu"))
    assert (layout.world_size, layout.rank, layout.device.type, layout.sharded) == (1, 0, "cpu", False)


def test_mixed_precision_needs_a_process_group() -> None:
    config = TrainEngineConfig(model=_model(), device="cpu", precision=PrecisionConfig(compute_dtype="bfloat16"))
    with pytest.raises(TrainConfigError, match="needs FSDP2 mixed precision; initialise a process group"):
        resolve_layout(config)


def test_cpu_offload_needs_cuda() -> None:
    config = TrainEngineConfig(model=_model(), device="cpu", offload=OffloadConfig(fsdp_cpu_offload=True))
    with pytest.raises(TrainConfigError, match=r"fsdp_cpu_offload=True offloads from a CUDA device"):
        resolve_layout(config)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown when no CUDA device exists")
def test_cuda_without_a_device_is_refused() -> None:
    with pytest.raises(TrainConfigError, match="device='cuda' but no CUDA device is visible"):
        resolve_layout(TrainEngineConfig(model=_model(), device="cuda"))


@pytest.mark.parametrize(
    ("make", "field", "found"),
    [
        (lambda: OptimizerConfig(lr=0.0), "lr", 0.0),
        (lambda: PrecisionConfig(compute_dtype="half"), "compute_dtype", "half"),
        (lambda: ModelConfig(hf_config=qwen_config(), fast_forward=1), "fast_forward", 1),
        (
            lambda: TrainEngineConfig(
                model=_model(), data_parallel="ddp", offload=OffloadConfig(fsdp_cpu_offload=True)
            ),
            "offload.fsdp_cpu_offload",
            True,
        ),
    ],
)
def test_errors_name_the_field_relative_to_the_config_that_raised(make, field: str, found) -> None:
    with pytest.raises(TrainConfigError) as caught:
        make()
    assert (caught.value.field, caught.value.found) == (field, found) and caught.value.expected


def test_ddp_replicas_refuse_mixed_precision_when_configured() -> None:
    with pytest.raises(TrainConfigError, match="replicas have no mixed precision") as caught:
        TrainEngineConfig(model=_model(), data_parallel="ddp", precision=PrecisionConfig(compute_dtype="bfloat16"))
    assert caught.value.field == "precision.compute_dtype"
    TrainEngineConfig(model=_model(), data_parallel="ddp", precision=PrecisionConfig(param_dtype="bfloat16"))


def test_a_cosine_schedule_may_leave_its_length_to_the_caller() -> None:
    schedule = ScheduleConfig(kind="cosine", warmup_steps=2)
    assert lr_multiplier(ScheduleConfig(kind="cosine", warmup_steps=2, total_steps=4))(4) == 0.0
    assert schedule.total_steps is None


def test_an_hf_config_mapping_builds_the_transformers_config() -> None:
    model = ModelConfig(hf_config={"model_type": "qwen2", "hidden_size": 32, "num_attention_heads": 4})
    built = load_hf_config(model)
    assert (type(built).__name__, built.hidden_size, built.num_attention_heads) == ("Qwen2Config", 32, 4)
    assert model.hf_config == {"model_type": "qwen2", "hidden_size": 32, "num_attention_heads": 4}


def test_an_hf_config_mapping_of_an_unknown_model_type_is_named() -> None:
    with pytest.raises(TrainConfigError, match=r"hf_config.model_type must be a model type .* got 'qwen9'") as caught:
        ModelConfig(hf_config={"model_type": "qwen9"})
    assert caught.value.field == "hf_config.model_type" and "did you mean" in caught.value.fix


def test_an_hf_config_mapping_that_transformers_refuses_is_named() -> None:
    with pytest.raises(
        TrainConfigError, match=r"hf_config does not build a transformers config: .*layer_types"
    ) as caught:
        ModelConfig(hf_config={"model_type": "qwen2", "num_hidden_layers": 2, "layer_types": ["x"]})
    assert caught.value.field == "hf_config" and caught.value.fix.startswith("transformers says:")
