"""The optimiser and learning-rate schedule part of the engine's config: AdamW, gradient clipping, warm-up and
decay."""

from __future__ import annotations

from dataclasses import dataclass

from rl_engines.training._config_checks import check_non_negative, check_positive, invalid

SCHEDULES = ("constant", "cosine")


@dataclass(frozen=True)
class OptimizerConfig:
    """AdamW and gradient clipping."""

    lr: float = 1e-6
    """Peak learning rate."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW's (beta1, beta2)."""
    eps: float = 1e-8
    """AdamW's epsilon."""
    weight_decay: float = 0.01
    """Decoupled weight decay."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm to this; null disables clipping (the norm is still reported)."""

    def __post_init__(self) -> None:
        check_positive("OptimizerConfig", "lr", self.lr)
        check_positive("OptimizerConfig", "eps", self.eps)
        check_non_negative("OptimizerConfig", "weight_decay", self.weight_decay)
        if len(self.betas) != 2 or not all(0 <= beta < 1 for beta in self.betas):
            raise invalid(
                "OptimizerConfig",
                "betas",
                "two numbers in [0, 1) (beta1, beta2)",
                self.betas,
                message=f"OptimizerConfig.betas must be two numbers in [0, 1), got {self.betas!r}",
            )
        if self.max_grad_norm is not None:
            check_positive("OptimizerConfig", "max_grad_norm", self.max_grad_norm)


@dataclass(frozen=True)
class ScheduleConfig:
    """Learning-rate schedule: linear warm-up, then constant or cosine decay to `min_lr_ratio * lr`.

    The schedule advances once per `TrainEngine.step_lr_scheduler()` call (once per RL step, as verl).
    """

    kind: str = "constant"
    """What follows the warm-up: "constant", or "cosine" decay to `min_lr_ratio * lr` at `total_steps`."""
    warmup_steps: int = 0
    """Steps of linear warm-up from 0 to the peak rate."""
    total_steps: int | None = None
    """Length of the schedule (warm-up included), needed by "cosine" when the engine is built; a trainer may
    fill in its run's length (null in a run config: the run's training steps)."""
    min_lr_ratio: float = 0.0
    """The cosine floor as a fraction of the peak rate."""

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULES:
            raise invalid(
                "ScheduleConfig",
                "kind",
                f"one of {list(SCHEDULES)}",
                self.kind,
                message=f"ScheduleConfig.kind={self.kind!r} is not one of {list(SCHEDULES)}",
            )
        if self.warmup_steps < 0:
            raise invalid("ScheduleConfig", "warmup_steps", ">= 0", self.warmup_steps)
        if not 0 <= self.min_lr_ratio <= 1:
            raise invalid(
                "ScheduleConfig",
                "min_lr_ratio",
                "a number in [0, 1]",
                self.min_lr_ratio,
                message=f"ScheduleConfig.min_lr_ratio must lie in [0, 1], got {self.min_lr_ratio}",
            )
        if self.kind == "cosine" and self.total_steps is not None and self.total_steps <= self.warmup_steps:
            raise invalid(
                "ScheduleConfig",
                "total_steps",
                f"> warmup_steps={self.warmup_steps}",
                self.total_steps,
                message=f"ScheduleConfig(kind='cosine') needs total_steps > warmup_steps={self.warmup_steps}, "
                f"got total_steps={self.total_steps}",
            )

    def require_length(self) -> None:
        """Raise `TrainConfigError` when a cosine schedule does not know its length yet (`total_steps` None)."""
        if self.kind == "cosine" and self.total_steps is None:
            raise invalid(
                "ScheduleConfig",
                "total_steps",
                f"an int > warmup_steps={self.warmup_steps} for kind='cosine'",
                None,
                message=f"ScheduleConfig(kind='cosine') needs total_steps > warmup_steps={self.warmup_steps}, "
                "got total_steps=None",
            )
