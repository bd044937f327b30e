"""Run-config section of the algorithm: advantage estimator, policy and value losses, aggregation, entropy and KL.

This is the one definition of the RL-only knobs: the roles (`rl_runtime.roles`) read it as it is
(`ActorRole.from_config`), with no config class of their own mirroring it.

Names are checked against rl-core's registries when a config is built, and each algorithm's parameters
against the keyword parameters of the registered function, so a typo in either is caught before a run.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from rl_core.advantages import ADVANTAGE_ESTIMATORS, check_advantage_params
from rl_core.kl import KL_ESTIMATORS
from rl_core.losses import (
    AGGREGATIONS,
    POLICY_LOSSES,
    ROLLOUT_CORRECTION_DEFAULT_UPPER,
    ROLLOUT_CORRECTION_LEVELS,
    ROLLOUT_CORRECTION_MODES,
    check_policy_loss_params,
)
from rl_runtime.config._errors import config_error
from rl_runtime.config._types import Scalar
from rl_runtime.config._validators import (
    Validator,
    int_at_least,
    number_in,
    of_type,
    optional,
    params_for,
    registered_name,
)

_DEFAULT_KL_COEF = 1e-3
_DEFAULT_MAX_DRAWS = 8
"""DAPO draws up to this many prompt batches per step to fill it with informative groups (verl's max_num_gen_batches
is unbounded by default; a bound turns a reward that never varies into an error instead of a hang)."""
_DEFAULT_OVERLONG_PENALTY = 1.0
_DEFAULT_VALUE_CLIP = 0.5
"""verl's critic `cliprange_value`."""
_TRUNCATED = ROLLOUT_CORRECTION_MODES[0]
"""rl-core's "tis"."""
_DEFAULT_KL_HORIZON = 10_000
"""Samples over which the adaptive controller may change the coefficient by e^±0.2 (verl's default)."""


ASYNC_GENERATION_MODES = ("step", "continuous")
"""`algorithm.async_generation`'s values."""

AUTO_POLICY_LOSS = "auto"
"""`algorithm.policy_loss` value that picks the loss from the staleness (`resolve_policy_loss`)."""
DECOUPLED_LOSS = "decoupled_ppo"
"""The policy loss that weights every token by proximal / behaviour itself (rl_core.losses.decoupled_ppo)."""
ON_POLICY_LOSS = "ppo"
"""The loss "auto" runs when nothing else corrects for stale samples (synchronous, or a rollout_correction)."""


class RecomputeOldLogProb(enum.Enum):
    """When the `compute_old_log_prob` node runs its own forward pass for the old log-probs."""

    AUTO = "auto"
    """Skip it when the step is on-policy: one PPO epoch of one mini-batch (`batch.ppo_epochs` = 1,
    `batch.mini_batches_per_step` = 1) and no KL in the reward. The single update then starts from the weights
    that sampled, so the actor takes the detached log-probs of its own training forward as the old ones (ratio
    exactly 1, the same loss and gradient, as verl's actor does) and reports the entropy and rollout-probability
    metrics from that forward. Exact for models whose training forward equals their eval forward (no dropout)."""
    ALWAYS = "always"
    """Always run the separate forward (the old log-probs are then in the batch for every node after it)."""


class KLMode(enum.Enum):
    """Where the KL to the reference policy enters the objective."""

    NONE = "none"
    """Not at all (the reference log-probs are still computed when the pipeline asks for them)."""
    IN_REWARD = "in_reward"
    """As a per-token penalty subtracted from the rewards before the advantages (verl `use_kl_in_reward`):
    `token_level_rewards = token_level_scores - coef * KL(old_log_probs, ref_log_probs)`. It needs the log-probs
    before the advantages: a built-in pipeline runs its variant that computes the old and reference log-probs first
    (`rl_core.graph.KL_IN_REWARD_PIPELINES`, verl's order; the old-log-prob forward then always runs); a pipeline
    file must put its compute_ref_log_prob node before compute_advantage (refused when the config loads if not)."""
    AS_LOSS = "as_loss"
    """As a loss term added to the policy loss (verl `use_kl_loss`, GRPO's choice)."""


@attrs.frozen
class KLConfig:
    """The KL to the reference policy."""

    mode: KLMode = attrs.field(default=KLMode.AS_LOSS, validator=of_type(KLMode))
    """"none", "in_reward" (a penalty in the rewards; the built-in pipelines then compute the old and reference
    log-probs before the advantages) or "as_loss"."""
    estimator: str = attrs.field(default="low_var_kl", validator=registered_name(KL_ESTIMATORS, "KL estimator"))
    """Per-token KL estimator (rl_core.kl.KL_ESTIMATORS: k1, k2, k3/low_var_kl, abs, mse, ...)."""
    coef: float = attrs.field(default=_DEFAULT_KL_COEF, validator=number_in(0))
    """The KL coefficient (the starting value when `target` is set)."""
    target: float | None = attrs.field(default=None, validator=optional(number_in(0, low_open=True)))
    """Target KL of the adaptive controller; null keeps `coef` fixed."""
    horizon: int = attrs.field(default=_DEFAULT_KL_HORIZON, validator=int_at_least(1))
    """Samples over which the adaptive controller adapts the coefficient (verl `kl_ctrl.horizon`; each step counts
    its `prompts_per_step x samples_per_prompt` samples, on every placement); above 0.2 x those (checked when the
    config loads), so no update can drive the coefficient to 0."""


@attrs.frozen
class DynamicSamplingConfig:
    """DAPO dynamic sampling: drop prompt groups whose rewards do not vary and draw more prompts to refill."""

    epsilon: float = attrs.field(default=0.0, validator=number_in(0))
    """A group is kept when the population std of its scores exceeds this (0: any variation)."""
    max_draws: int = attrs.field(default=_DEFAULT_MAX_DRAWS, validator=int_at_least(1))
    """Prompt batches a rank may draw per step before the step fails with a message naming this setting."""


class RewardKind(enum.Enum):
    """Where a sample's sequence reward comes from."""

    TASK = "task"
    """The task's score of the response (text pipelines)."""
    SRPO = "srpo"
    """Embodied: 1 for a success, SRPO's progress reward in (0, 0.6) for a failure (needs an `embedder`)."""
    BINARY = "binary"
    """Embodied: 1 for a success, 0 for a failure (the GRPO baseline of SRPO)."""


def _check_band(instance: EmbodiedSamplingConfig, attribute: attrs.Attribute[Any], value: float) -> None:
    if attribute.name == "upper" and value < instance.lower:
        raise config_error("upper", f">= lower={instance.lower}", value, "raise upper or lower lower")


@attrs.frozen
class EmbodiedSamplingConfig:
    """siiRL's embodied dynamic sampling: keep the prompt groups whose success rate lies in [lower, upper]."""

    lower: float = attrs.field(default=0.1, validator=number_in(0, 1))
    """Lowest kept success rate of a group (all-fail groups fall below it)."""
    upper: float = attrs.field(default=0.9, validator=[number_in(0, 1), _check_band])
    """Highest kept success rate of a group (all-success groups lie above it)."""
    filter_truncated: bool = attrs.field(default=False, validator=of_type(bool))
    """Also drop every group with an episode that did not complete (siiRL's truncation filter; off in its SRPO
    scripts, since failures are mostly step-limit truncations)."""


@attrs.frozen
class OverlongConfig:
    """DAPO overlong reward shaping: a penalty ramping down over the last `buffer_length` response tokens."""

    buffer_length: int = attrs.field(validator=int_at_least(1))
    """Length of the penalty ramp in tokens, at most `data.max_response_length`."""
    penalty_factor: float = attrs.field(default=_DEFAULT_OVERLONG_PENALTY, validator=number_in(0))
    """The penalty at the full response length."""


def _check_lower(instance: RolloutCorrectionConfig, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is None:
        return
    if instance.mode == _TRUNCATED:
        raise config_error(
            attribute.name,
            "null for mode 'tis' (truncated IS clamps the weights above at `upper` only)",
            value,
            "remove lower, or set mode=mis to mask ratios outside [lower, upper]",
        )
    if not 0 < value <= instance.upper:
        raise config_error(attribute.name, f"a number in (0, upper={instance.upper}]", value)


@attrs.frozen
class RolloutCorrectionConfig:
    """Importance sampling between the rollout engine's and the trainer's log-probs (`with_rollout_correction`).

    Every policy loss is wrapped: the per-token loss is weighted by `w = pi_train / pi_rollout`, truncated ("tis")
    or with out-of-bounds tokens (or sequences) masked out ("mis"); verl's `rollout_corr/rollout_is_*` metrics
    are reported each step.
    """

    mode: str = attrs.field(
        default=_TRUNCATED, validator=registered_name(ROLLOUT_CORRECTION_MODES, "rollout correction mode")
    )
    """"tis" (truncated importance sampling) or "mis" (masked: drop ratios outside [lower, upper])."""
    level: str = attrs.field(
        default="token", validator=registered_name(ROLLOUT_CORRECTION_LEVELS, "rollout correction level")
    )
    """"token" (a ratio per token) or "sequence" (the product of the sequence's token ratios)."""
    upper: float = attrs.field(default=ROLLOUT_CORRECTION_DEFAULT_UPPER, validator=number_in(0, low_open=True))
    """The truncation threshold ("tis") or the upper bound of the kept ratios ("mis"); verl's default 2.0."""
    lower: float | None = attrs.field(default=None, validator=_check_lower)
    """"mis" only: the lower bound of the kept ratios, in (0, upper]; null means 1 / upper."""


def _check_kl_target(instance: AlgorithmConfig, attribute: attrs.Attribute[Any], value: KLConfig) -> None:
    # The adaptive controller steers a KL measured in the reward; a loss-side KL has nothing to steer.
    if value.target is not None and value.mode is not KLMode.IN_REWARD:
        raise config_error(
            f"{attribute.name}.target",
            "null unless kl.mode is 'in_reward' (the adaptive controller steers the in-reward KL)",
            value.target,
            f"set {attribute.name}.mode=in_reward or remove {attribute.name}.target",
        )


def _values_accepted(
    kind: str, short: str, name_of: Callable[[AlgorithmConfig], str], check: Callable[[str, Mapping[str, Any]], None]
) -> Validator:
    """The registered `kind` that runs (`name_of(algorithm)`; `short` in the fix) accepts the values of its parameters
    (names and types are `params_for`'s check): `check(name, params)` asks it; its ValueError becomes a ConfigError."""

    def validate(instance: AlgorithmConfig, attribute: attrs.Attribute[Any], value: Mapping[str, Any]) -> None:
        name = name_of(instance)
        try:
            check(name, dict(value))
        except ValueError as error:
            raise config_error(
                attribute.name,
                f"parameters {kind} {name!r} accepts",
                value,
                f"{error.__cause__ or error}; change the value or remove it to keep the {short}'s default",
            ) from error

    return validate


@attrs.frozen
class AlgorithmConfig:
    """The RL algorithm: how advantages are estimated and what loss the policy minimises."""

    adv_estimator: str = attrs.field(
        default="grpo", validator=registered_name(ADVANTAGE_ESTIMATORS, "advantage estimator")
    )
    """Advantage estimator (rl_core.advantages.ADVANTAGE_ESTIMATORS: grpo, rloo, gae, reinforce_plus_plus, ...)."""
    adv_params: dict[str, Scalar] = attrs.field(
        factory=dict,
        validator=[
            params_for(ADVANTAGE_ESTIMATORS, "adv_estimator", "advantage estimator"),
            # the group size, batch.samples_per_prompt, is checked with the batch (_schema_algorithm_batch)
            _values_accepted(
                "advantage estimator", "estimator", lambda algorithm: algorithm.adv_estimator, check_advantage_params
            ),
        ],
    )
    """Keyword parameters of the estimator (grpo: norm_by_std, epsilon; gae: gamma, lam); unset ones keep defaults. A
    value the estimator refuses (or a group size, `batch.samples_per_prompt`) is refused when the config loads."""
    policy_loss: str = attrs.field(
        default=AUTO_POLICY_LOSS,
        validator=registered_name(POLICY_LOSSES, "policy loss", extra=(AUTO_POLICY_LOSS,)),
    )
    """Policy loss (rl_core.losses.POLICY_LOSSES: ppo, decoupled_ppo, gspo, cispo, sapo, clip_cov, kl_cov, ...), or
    "auto": decoupled_ppo when max_staleness > 0 and rollout_correction is null (it corrects for the samples'
    staleness), else ppo (`resolve_policy_loss`; the run's log names the loss it ran)."""
    policy_loss_params: dict[str, Scalar] = attrs.field(
        factory=dict,
        validator=[
            params_for(
                POLICY_LOSSES, "policy_loss", "policy loss", resolve=lambda algorithm: resolve_policy_loss(algorithm)
            ),
            _values_accepted(
                "policy loss", "loss", lambda algorithm: resolve_policy_loss(algorithm), check_policy_loss_params
            ),
        ],
    )
    """Keyword parameters of the loss that runs (ppo: clip_ratio, clip_ratio_low, clip_ratio_high, clip_ratio_c;
    decoupled_ppo: the same and behav_imp_weight_cap)."""
    loss_agg_mode: str = attrs.field(
        default="token-mean", validator=registered_name(AGGREGATIONS, "loss aggregation mode")
    )
    """How per-token losses reduce to a scalar (token-mean, seq-mean-token-mean, seq-mean-token-sum, ...)."""
    entropy_coef: float = attrs.field(default=0.0, validator=number_in(0))
    """Weight of the entropy bonus subtracted from the policy loss; 0 disables it."""
    kl: KLConfig = attrs.field(factory=KLConfig, validator=[of_type(KLConfig), _check_kl_target])
    """The KL to the reference policy."""
    dynamic_sampling: DynamicSamplingConfig | None = attrs.field(
        default=None, validator=optional(of_type(DynamicSamplingConfig))
    )
    """DAPO dynamic sampling settings; required by pipelines with a dynamic_sampling node (dapo), else null."""
    overlong: OverlongConfig | None = attrs.field(default=None, validator=optional(of_type(OverlongConfig)))
    """DAPO overlong reward shaping; null disables it."""
    reward: RewardKind = attrs.field(default=RewardKind.TASK, validator=of_type(RewardKind))
    """"task" (text pipelines: the task's score), or for embodied pipelines "srpo" (progress reward) or "binary"
    (success only, the GRPO baseline)."""
    rule_reward_weight: float = attrs.field(default=1.0, validator=number_in(0))
    """Text pipelines: the sequence score is `rule_reward_weight` x the task's rule reward (or a workflow's own
    reward) plus `weight` x the score of each model-based reward (`reward_model`, `judge`). 0 replaces the rule
    reward by the model-based ones (the task is then not asked to score); needs one of them."""
    embodied_sampling: EmbodiedSamplingConfig | None = attrs.field(
        default=None, validator=optional(of_type(EmbodiedSamplingConfig))
    )
    """The success-rate band; required by pipelines with an embodied_sampling node (embodied_srpo), else null."""
    value_clip: float | None = attrs.field(default=_DEFAULT_VALUE_CLIP, validator=optional(number_in(0, low_open=True)))
    """The critic's value loss clips new values to within this of the old ones; null disables the clip."""
    rollout_correction: RolloutCorrectionConfig | None = attrs.field(
        default=None, validator=optional(of_type(RolloutCorrectionConfig))
    )
    """Truncated or masked importance sampling of the policy loss between the rollout engine's and the trainer's
    log-probs (TIS/MIS, verl `algorithm.rollout_correction`); null disables it."""
    offload_reference: bool = attrs.field(default=False, validator=of_type(bool))
    """Keep the reference policy's weights in CPU memory except while it computes log-probs (needs CUDA)."""
    max_staleness: int = attrs.field(default=0, validator=int_at_least(0))
    """Asynchronous training's bound eta: at most this many actor updates between the policy that generated a
    sample and the one that trains on it. 0 is the synchronous loop; 1 is one-step-off (the rollout slots sample
    step k+1 while step k trains); k lets the rollout slots run k steps ahead. Needs placement.colocate=false."""
    async_generation: str = attrs.field(
        default="step", validator=registered_name(ASYNC_GENERATION_MODES, "asynchronous generation mode")
    )
    """How the rollout slots generate when max_staleness > 0: "step" (a batch per step, each step waits for its
    longest response) or "continuous" (requests stay in flight across steps and weight updates, which park and resume
    them; a step takes the groups that finished first; max_staleness >= 1, hf engine, single-turn rollouts)."""
    recompute_old_log_prob: RecomputeOldLogProb = attrs.field(
        default=RecomputeOldLogProb.AUTO, validator=of_type(RecomputeOldLogProb)
    )
    """"auto" or "always": "auto" saves the separate old-log-prob forward of on-policy steps (one PPO epoch, one
    mini-batch, no KL in the reward), taking the old log-probs from the actor's training forward instead; "always"
    runs it every step (for custom pipelines whose nodes read `old_log_probs` before the actor update)."""
    skip_inert_rows: bool = attrs.field(default=False, validator=of_type(bool))
    """True: where the update is the on-policy ppo step of a synchronous run (the step "auto" above saves a pass on,
    max_staleness 0) with no KL loss, entropy bonus or rollout correction, on an actor engine that runs such rows apart
    (ddp replicas or one process, not FSDP2 sharding), run no forward at all for the rows whose loss is identically zero
    (every response token's advantage 0: a GRPO group that scored alike). The update, its loss and their metrics are
    unchanged for finite outputs (the ratio is 1 whatever those rows' log-probs; a non-finite output in a skipped row no
    longer skips the step); `actor/entropy` and `training/rollout_probs_diff_*` then cover the trained rows only (NaN on
    a rank with none), and the step's batch gets no `old_log_probs` (a custom node reading them after the update needs
    false). Elsewhere every row's forward runs, as with false (the worker logs why). `actor/inert_row_fraction` reports
    the rows' share wherever the loss has such rows."""


def resolve_policy_loss(algorithm: AlgorithmConfig) -> str:
    """The policy loss `algorithm` runs: `policy_loss`, with "auto" replaced by "decoupled_ppo" when `max_staleness`
    > 0 and no `rollout_correction` is set (samples from an older policy need its behaviour weights), else "ppo"."""
    if algorithm.policy_loss != AUTO_POLICY_LOSS:
        return algorithm.policy_loss
    if algorithm.max_staleness > 0 and algorithm.rollout_correction is None:
        return DECOUPLED_LOSS
    return ON_POLICY_LOSS
