"""The batch plan: a run's batch settings and data-parallel sizes resolved into whole per-rank numbers.

Samples flow prompt-major: each rollout rank takes whole prompts (so a group never straddles ranks), the
step's samples are spread over the train ranks, then cut into mini-batches (one optimizer step each) for
every PPO epoch. Each of those divisions must be exact on every rank, or ranks would disagree about how
many collective optimizer steps to take; the plan refuses a split that is not, naming the setting to change.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs

from rl_runtime.config._errors import ConfigError, ConfigProblem
from rl_runtime.config._validators import int_at_least

if TYPE_CHECKING:
    from rl_runtime.config._schema import RunConfig

SETTING_PATHS = {
    "prompts_per_step": "batch.prompts_per_step",
    "samples_per_prompt": "batch.samples_per_prompt",
    "mini_batches_per_step": "batch.mini_batches_per_step",
    "ppo_epochs": "batch.ppo_epochs",
    "max_tokens_per_micro_batch": "actor.micro_batch.max_tokens_per_micro_batch",
    "max_prompt_length": "data.max_prompt_length",
    "max_response_length": "data.max_response_length",
    "rollout_dp": "rollout_dp",
    "train_dp": "train_dp",
}
"""Where each input of the plan is set in a run config; problems are reported under these paths."""
_MAX_SUGGESTIONS = 6


def _setting(name: str) -> Any:
    """An input field: an int >= 1, reported under its run-config path."""
    check = int_at_least(1)

    def validate(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        try:
            check(instance, attribute, value)
        except ConfigError as exc:
            raise ConfigError([attrs.evolve(p, path=SETTING_PATHS[name]) for p in exc.problems]) from None

    return attrs.field(validator=validate)


def _divisors_near(number: int, target: int) -> list[int]:
    divisors = [d for d in range(1, number + 1) if number % d == 0]
    return sorted(sorted(divisors, key=lambda d: (abs(d - target), d))[:_MAX_SUGGESTIONS])


@attrs.frozen
class BatchPlan:
    """Batch settings and data-parallel sizes, checked to divide exactly, with the per-rank numbers they give."""

    prompts_per_step: int = _setting("prompts_per_step")
    """Prompts drawn per training step."""
    samples_per_prompt: int = _setting("samples_per_prompt")
    """Responses per prompt (the group size)."""
    mini_batches_per_step: int = _setting("mini_batches_per_step")
    """Mini-batches (optimizer steps) per PPO epoch."""
    ppo_epochs: int = _setting("ppo_epochs")
    """Passes over the step's samples."""
    max_tokens_per_micro_batch: int = _setting("max_tokens_per_micro_batch")
    """Token budget of one forward/backward of the actor on one train rank."""
    max_prompt_length: int = _setting("max_prompt_length")
    """Longest prompt in tokens."""
    max_response_length: int = _setting("max_response_length")
    """Longest response in tokens."""
    rollout_dp: int = _setting("rollout_dp")
    """Data-parallel size of the rollout stage."""
    train_dp: int = _setting("train_dp")
    """Data-parallel size of the training stage."""

    @classmethod
    def from_config(cls, config: RunConfig, *, rollout_dp: int, train_dp: int) -> BatchPlan:
        """The plan of `config` for the given data-parallel sizes; raises `ConfigError` when it cannot split."""
        return cls(
            prompts_per_step=config.batch.prompts_per_step,
            samples_per_prompt=config.batch.samples_per_prompt,
            mini_batches_per_step=config.batch.mini_batches_per_step,
            ppo_epochs=config.batch.ppo_epochs,
            max_tokens_per_micro_batch=config.actor.micro_batch.max_tokens_per_micro_batch,
            max_prompt_length=config.data.max_prompt_length,
            max_response_length=config.data.max_response_length,
            rollout_dp=rollout_dp,
            train_dp=train_dp,
        )

    def __attrs_post_init__(self) -> None:
        problems = self._split_problems()
        if problems:
            raise ConfigError(problems)

    def _split_problems(self) -> list[ConfigProblem]:
        problems = []
        prompts, n, samples = self.prompts_per_step, self.samples_per_prompt, self.samples_per_step
        prompt_step = self.train_dp // math.gcd(n, self.train_dp)
        # The suggested value satisfies the rollout and the train split at once.
        suggestion = _next_multiple(prompts, math.lcm(self.rollout_dp, prompt_step))
        if prompts % self.rollout_dp:
            problems.append(
                ConfigProblem(
                    SETTING_PATHS["prompts_per_step"],
                    f"a multiple of the rollout dp={self.rollout_dp} (each rollout rank samples whole groups)",
                    f"prompts_per_step={prompts}, which cannot split over rollout dp={self.rollout_dp}",
                    f"use a multiple of {self.rollout_dp}, e.g. prompts_per_step={suggestion}",
                )
            )
        if samples % self.train_dp:
            problems.append(
                ConfigProblem(
                    SETTING_PATHS["prompts_per_step"],
                    f"samples per step divisible by the train dp={self.train_dp}",
                    f"prompts_per_step={prompts} x samples_per_prompt={n} = {samples} samples, which cannot split "
                    f"over train dp={self.train_dp}",
                    f"use a multiple of {prompt_step}, e.g. prompts_per_step={suggestion}",
                )
            )
        elif (samples // self.train_dp) % self.mini_batches_per_step:
            per_rank = samples // self.train_dp
            options = ", ".join(str(d) for d in _divisors_near(per_rank, self.mini_batches_per_step))
            problems.append(
                ConfigProblem(
                    SETTING_PATHS["mini_batches_per_step"],
                    f"a divisor of the {per_rank} samples each of the train dp={self.train_dp} ranks holds",
                    f"mini_batches_per_step={self.mini_batches_per_step}: {samples} samples / train dp={self.train_dp} "
                    f"= {per_rank} per rank cannot form {self.mini_batches_per_step} equal mini-batches",
                    f"use one of {options}",
                )
            )
        if self.max_tokens_per_micro_batch < self.max_sequence_length:
            problems.append(
                ConfigProblem(
                    SETTING_PATHS["max_tokens_per_micro_batch"],
                    f"at least one full sequence: max_prompt_length + max_response_length = {self.max_sequence_length}",
                    f"max_tokens_per_micro_batch={self.max_tokens_per_micro_batch}",
                    f"raise it to at least {self.max_sequence_length} or shorten the maximum lengths",
                )
            )
        return problems

    @property
    def samples_per_step(self) -> int:
        """Samples generated and trained on per training step."""
        return self.prompts_per_step * self.samples_per_prompt

    @property
    def prompts_per_rollout_rank(self) -> int:
        """Prompts each rollout rank samples per step."""
        return self.prompts_per_step // self.rollout_dp

    @property
    def samples_per_rollout_rank(self) -> int:
        """Samples each rollout rank produces per step."""
        return self.samples_per_step // self.rollout_dp

    @property
    def samples_per_train_rank(self) -> int:
        """Samples each train rank holds per step."""
        return self.samples_per_step // self.train_dp

    @property
    def mini_batch_size(self) -> int:
        """Samples in one mini-batch, over all train ranks."""
        return self.samples_per_step // self.mini_batches_per_step

    @property
    def mini_batch_size_per_rank(self) -> int:
        """Samples of one mini-batch on one train rank."""
        return self.samples_per_train_rank // self.mini_batches_per_step

    @property
    def optimizer_steps_per_step(self) -> int:
        """Optimizer steps per training step: mini-batches times PPO epochs."""
        return self.mini_batches_per_step * self.ppo_epochs

    @property
    def max_sequence_length(self) -> int:
        """Longest prompt plus longest response, in tokens."""
        return self.max_prompt_length + self.max_response_length

    @property
    def max_micro_batches_per_mini_batch(self) -> int:
        """Micro-batches a rank's mini-batch needs at worst (every sequence at full length)."""
        per_micro_batch = self.max_tokens_per_micro_batch // self.max_sequence_length
        return -(-self.mini_batch_size_per_rank // per_micro_batch)

    def describe(self) -> str:
        """A readable multi-line table of the settings and what they resolve to."""
        rows = [
            ("prompts per step", f"{self.prompts_per_step}", SETTING_PATHS["prompts_per_step"]),
            ("samples per prompt", f"{self.samples_per_prompt}", SETTING_PATHS["samples_per_prompt"]),
            ("samples per step", f"{self.samples_per_step}", "prompts x samples per prompt"),
            ("rollout dp", f"{self.rollout_dp}", "from the placement"),
            ("  prompts / samples per rank", f"{self.prompts_per_rollout_rank} / {self.samples_per_rollout_rank}", ""),
            ("train dp", f"{self.train_dp}", "from the placement"),
            ("  samples per rank", f"{self.samples_per_train_rank}", ""),
            ("mini-batches per epoch", f"{self.mini_batches_per_step}", SETTING_PATHS["mini_batches_per_step"]),
            ("  samples per mini-batch", f"{self.mini_batch_size} ({self.mini_batch_size_per_rank} per rank)", ""),
            ("PPO epochs", f"{self.ppo_epochs}", SETTING_PATHS["ppo_epochs"]),
            ("optimizer steps per step", f"{self.optimizer_steps_per_step}", "mini-batches x epochs"),
            ("max sequence length", f"{self.max_sequence_length}", "max prompt + max response"),
            (
                "micro-batch token budget",
                f"{self.max_tokens_per_micro_batch}",
                SETTING_PATHS["max_tokens_per_micro_batch"],
            ),
            ("  micro-batches per mini-batch", f"<= {self.max_micro_batches_per_mini_batch}", "at full length"),
        ]
        name_width = max(len(name) for name, _, _ in rows)
        value_width = max(len(value) for _, value, _ in rows)
        lines = ["batch plan"]
        lines += [f"  {name:<{name_width}}  {value:<{value_width}}  {note}".rstrip() for name, value, note in rows]
        return "\n".join(lines)


def _next_multiple(value: int, step: int) -> int:
    return -(-value // step) * step
