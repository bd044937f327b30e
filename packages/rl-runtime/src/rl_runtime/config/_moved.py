"""Run-config keys that moved when the engine sections became rl-engines' own `TrainEngineConfig`: an unknown key
that used to exist names its new place instead of the nearest name."""

from __future__ import annotations

_MOVED: dict[tuple[str, str], str] = {
    ("TrainEngineConfig", "optim"): (
        "optimizer (lr, betas, eps, weight_decay, grad_clip as max_grad_norm) and schedule (schedule as kind, "
        "warmup_steps, min_lr_ratio)"
    ),
    ("TrainEngineConfig", "dtype"): "precision.compute_dtype (or precision.param_dtype for ddp replicas)",
    ("TrainEngineConfig", "activation_checkpointing"): "model.gradient_checkpointing",
    ("TrainEngineConfig", "cpu_offload"): "offload.fsdp_cpu_offload (the reference's: algorithm.offload_reference)",
    ("TrainEngineConfig", "pin_memory"): "offload.pin_memory",
    ("TrainEngineConfig", "value_clip"): "algorithm.value_clip",
    ("BatchConfig", "max_tokens_per_micro_batch"): (
        "actor.micro_batch.max_tokens_per_micro_batch (and the critic's and the reference's)"
    ),
}
"""(config class name, old key) -> where the setting lives now."""


def moved_key_fix(cls: type, key: str) -> str | None:
    """The fix for an unknown `key` of `cls` that is a setting moved elsewhere, or None."""
    new = _MOVED.get((cls.__name__, key))
    return f"moved to {new}" if new else None
