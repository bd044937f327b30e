"""The actor role around an engine: updates, its loss against direct rl_core computations, the on-policy update."""

from __future__ import annotations

import pytest
import torch

from rl_core.kl import kl_loss
from rl_core.losses import LossNormalizer, PolicyLossInputs, aggregate_loss, get_policy_loss, ppo
from rl_engines.training import ForwardSpec, FSDPEngine, ScheduleConfig
from rl_runtime.config import AlgorithmConfig, ConfigError
from rl_runtime.roles import ActorRole, RoleError
from rl_runtime.roles._actor import zero_advantage_rows
from rl_runtime.roles._errors import RoleConfigError

from ._helpers import algorithm, concat, engine_config, fake_outputs, mini_batches, ppo_loss_fn, rollout_batch


def test_actor_update_runs_epochs_over_mini_batches_then_one_schedule_step() -> None:
    schedule = ScheduleConfig(kind="constant", warmup_steps=2)
    role_engine = FSDPEngine.from_config(engine_config(schedule=schedule))
    manual = FSDPEngine.from_config(engine_config(schedule=schedule))
    role_engine.step_lr_scheduler(), manual.step_lr_scheduler()  # leave the zero-rate first warm-up step
    actor = ActorRole(role_engine, algorithm(), ppo_epochs=2)
    minis = mini_batches((1, 2))
    results = actor.update(concat(minis), num_mini_batches=2)
    for _ in range(2):
        for mini in minis:
            manual.train_step(mini, ppo_loss_fn, ForwardSpec())
    assert len(results) == 4 and role_engine.global_step == 4
    assert all(r.lr == pytest.approx(0.005) for r in results)
    assert role_engine.lr == pytest.approx(0.01)  # one schedule step after the update
    for (name, p), q in zip(role_engine.network.named_parameters(), manual.network.parameters(), strict=True):
        assert torch.equal(p, q), name
    assert {"actor/pg_clipfrac", "actor/ppo_kl"} <= set(results[0].metrics)


def test_actor_loss_adds_kl_and_subtracts_entropy() -> None:
    engine = FSDPEngine.from_config(engine_config())
    config = algorithm(policy_loss_params={"clip_ratio_high": 0.28}, kl_coef=0.1, kl_estimator="k3", entropy_coef=0.01)
    actor = ActorRole(engine, config)
    batch = rollout_batch(3, seed=4)
    batch["ref_log_probs"] = batch["old_log_probs"] - 0.1 * batch["response_mask"]
    outputs = fake_outputs(batch, seed=5)
    mask = batch["response_mask"]
    normalizer = LossNormalizer(float(mask.sum()) * 2, 6.0, 16.0)  # as if another rank held as many tokens
    loss, metrics = actor.objective(outputs, batch, normalizer)
    inputs = PolicyLossInputs(outputs.log_probs, batch["old_log_probs"], batch["advantages"], mask)
    expected = (
        ppo(inputs, normalizer=normalizer, clip_ratio_high=0.28).loss
        + 0.1 * kl_loss(outputs.log_probs, batch["ref_log_probs"], mask, estimator="k3", normalizer=normalizer)
        - 0.01 * aggregate_loss(outputs.entropy, mask, "token-mean", normalizer)
    )
    torch.testing.assert_close(loss, expected, atol=1e-7, rtol=1e-6)
    assert loss.requires_grad
    assert {"actor/kl_loss", "actor/entropy", "actor/pg_clipfrac"} <= set(metrics)
    assert actor._train_spec.entropy


def test_actor_kl_needs_reference_log_probs() -> None:
    engine = FSDPEngine.from_config(engine_config())
    actor = ActorRole(engine, algorithm(kl_coef=0.1))
    batch = rollout_batch(2, seed=0)
    with pytest.raises(RoleError, match=r"KL loss \(kl_coef > 0\) needs batch keys \['ref_log_probs'\]"):
        actor.update(batch)
    assert engine.global_step == 0  # refused before the engine ran the objective


def test_actor_old_log_probs_match_the_engine_forward() -> None:
    engine = FSDPEngine.from_config(engine_config())
    batch = rollout_batch(4, seed=0)
    outputs = ActorRole(engine, algorithm(), temperature=0.7).compute_log_probs(batch, with_entropy=True)
    direct = engine.forward(batch, ForwardSpec(entropy=True, temperature=0.7))
    torch.testing.assert_close(outputs.log_probs, direct.log_probs, atol=1e-5, rtol=0)
    torch.testing.assert_close(outputs.entropy, direct.entropy, atol=1e-5, rtol=0)


_ON_POLICY_CONFIGS = [
    (algorithm(), 1.0),
    (algorithm(kl_coef=0.1, kl_estimator="k3", entropy_coef=0.01), 0.7),
    (algorithm(policy_loss="gspo", loss_agg_mode="seq-mean-token-mean"), 1.0),
]


@pytest.mark.parametrize(("config", "temperature"), _ON_POLICY_CONFIGS)
def test_on_policy_update_equals_the_update_from_recomputed_old_log_probs(
    config: AlgorithmConfig, temperature: float
) -> None:
    full, lean = FSDPEngine.from_config(engine_config()), FSDPEngine.from_config(engine_config())
    batch = rollout_batch(4, seed=3)
    batch["ref_log_probs"] = batch.pop("old_log_probs") - 0.1 * batch["response_mask"]
    full_actor = ActorRole(full, config, temperature=temperature)
    lean_actor = ActorRole(lean, config, temperature=temperature)
    before = full_actor.compute_log_probs(batch, with_entropy=True)
    old = {**batch, "old_log_probs": before.log_probs}
    # The gradient of the loss itself: with the forward's detached log-probs as the old ones it is the same.
    spec = ForwardSpec(entropy=True, temperature=temperature)
    expected_grads = full.compute_gradients(old, full_actor.objective, spec)
    lean_grads = lean.compute_gradients(batch, lean_actor.objective, spec)
    for name, grad in expected_grads.items():
        torch.testing.assert_close(lean_grads[name], grad, atol=1e-6, rtol=1e-5, msg=name)

    [full_result] = full_actor.update(old)
    lean_result, forward = lean_actor.update_on_policy(batch)
    assert lean_result.loss == pytest.approx(full_result.loss, abs=1e-6)
    assert lean_result.grad_norm == pytest.approx(full_result.grad_norm, rel=1e-5)
    assert lean_result.metrics.keys() == full_result.metrics.keys()
    for name, value in full_result.metrics.items():
        assert lean_result.metrics[name] == pytest.approx(value, abs=1e-5), name
    for p, q in zip(full.network.parameters(), lean.network.parameters(), strict=True):
        torch.testing.assert_close(q, p, atol=1e-6, rtol=0)
    assert lean.global_step == full.global_step == 1 and lean.lr == full.lr
    # The training forward's outputs are the old log-probs and entropy the separate pass gave.
    torch.testing.assert_close(forward.log_probs, before.log_probs, atol=1e-5, rtol=0)
    torch.testing.assert_close(forward.entropy, before.entropy, atol=1e-5, rtol=0)
    assert forward.values is None and not forward.log_probs.requires_grad


def test_on_policy_update_places_each_micro_batch_by_its_rows() -> None:
    engine = FSDPEngine.from_config(engine_config())
    batch = rollout_batch(4, seed=5)
    del batch["old_log_probs"]
    batch["advantages"][[1, 2]] = 0.0  # rows whose forward runs without autograd (zero_advantage_rows)
    before = engine.forward(batch, ForwardSpec(entropy=True))
    result, forward = ActorRole(engine, algorithm()).update_on_policy(batch)
    assert result.num_micro_batches > 1
    torch.testing.assert_close(forward.log_probs, before.log_probs, atol=1e-5, rtol=0)
    torch.testing.assert_close(forward.entropy, before.entropy, atol=1e-5, rtol=0)
    assert "inert_rows" not in batch  # the caller's batch is left as it was


@pytest.mark.parametrize(
    ("config", "inert"),
    [
        (algorithm(), True),  # policy_loss "auto" at max_staleness 0: ppo
        (algorithm(policy_loss="ppo"), True),
        (algorithm(max_staleness=1), True),  # "auto" under staleness: decoupled_ppo
        (algorithm(policy_loss="decoupled_ppo"), True),
        (algorithm(kl_coef=0.1), False),
        (algorithm(entropy_coef=0.01), False),
        (algorithm(policy_loss="gspo"), False),
    ],
)
def test_only_a_loss_that_is_a_multiple_of_the_advantage_skips_zero_advantage_rows(
    config: AlgorithmConfig, inert: bool
) -> None:
    actor = ActorRole(FSDPEngine.from_config(engine_config()), config)
    assert actor.objective.inert_on_zero_advantage is inert
    batch = rollout_batch(3, seed=0)
    batch["advantages"][1] = 0.0
    batch["advantages"][2, batch["response_mask"][2].bool().nonzero()[0]] = 0.0  # one token only: not inert
    assert zero_advantage_rows(batch).tolist() == [False, True, False]


def test_update_needs_old_log_probs_and_equal_mini_batches() -> None:
    engine = FSDPEngine.from_config(engine_config())
    batch = concat(mini_batches((1, 2)))
    with pytest.raises(RoleError, match=r"8 samples on this rank do not split into batch\.mini_batches_per_step=3"):
        ActorRole(engine, algorithm()).update(batch, num_mini_batches=3)
    del batch["old_log_probs"]
    with pytest.raises(RoleError, match=r"batch of the actor's update has no 'old_log_probs'.*update_on_policy"):
        ActorRole(engine, algorithm()).update(batch, num_mini_batches=2)
    assert engine.global_step == 0  # refused before any step


def test_update_on_policy_refusals() -> None:
    engine = FSDPEngine.from_config(engine_config())
    [mini] = mini_batches((1,))
    with pytest.raises(RoleError, match=r"has 'old_log_probs', which it would not use; call update"):
        ActorRole(engine, algorithm()).update_on_policy(mini)
    del mini["old_log_probs"]
    with pytest.raises(
        RoleConfigError, match=r"one optimizer step, but the actor's ppo_epochs=2 \(batch\.ppo_epochs\)"
    ):
        ActorRole(engine, algorithm(), ppo_epochs=2).update_on_policy(mini)
    assert engine.global_step == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"policy_loss": "ppo2"},
            r"policy_loss: expected a registered policy loss .*found 'ppo2'.*did you mean 'ppo'\?",
        ),
        ({"loss_agg_mode": "mean"}, r"loss_agg_mode: expected a registered loss aggregation mode .*found 'mean'"),
        ({"kl_estimator": "k4"}, r"estimator: expected a registered KL estimator .*found 'k4'"),
        ({"kl_coef": -0.1}, r"coef: expected a finite number >= 0, found -0\.1"),
        ({"entropy_coef": float("nan")}, r"entropy_coef: expected a finite number >= 0, found nan"),
    ],
)
def test_actor_loss_settings_are_refused_where_they_are_defined(kwargs: dict, message: str) -> None:
    # The actor reads the run config's algorithm section; its checks refuse a bad loss before any role exists.
    with pytest.raises(ConfigError, match=message):
        algorithm(**kwargs)


def test_actor_refuses_bad_epochs_and_temperature() -> None:
    engine = FSDPEngine.from_config(engine_config())
    with pytest.raises(
        RoleConfigError, match=r"ActorRole: ppo_epochs must be an int >= 1 \(batch\.ppo_epochs\), got 0"
    ):
        ActorRole(engine, algorithm(), ppo_epochs=0)
    with pytest.raises(RoleConfigError, match=r"ActorRole: temperature must be a finite number > 0"):
        ActorRole(engine, algorithm(), temperature=0.0)


def test_actor_keeps_its_own_read_only_parameters() -> None:
    params = {"clip_ratio": 0.3}
    actor = ActorRole(FSDPEngine.from_config(engine_config()), algorithm(policy_loss_params=params))
    params["clip_ratio"] = 0.9
    assert actor.objective.params["clip_ratio"] == 0.3
    with pytest.raises(TypeError):
        actor.objective.params["clip_ratio"] = 0.5  # pyright: ignore[reportIndexIssue]


@pytest.mark.parametrize(("max_staleness", "loss"), [(0, "ppo"), (1, "decoupled_ppo")])
def test_actor_runs_the_loss_the_default_auto_resolves_to(max_staleness: int, loss: str) -> None:
    # policy_loss=auto: synchronous runs keep ppo (their figures unchanged), stale samples get decoupled_ppo.
    actor = ActorRole(FSDPEngine.from_config(engine_config()), algorithm(max_staleness=max_staleness))
    assert actor.objective.loss_fn is get_policy_loss(loss)


def test_actor_needs_a_trainable_engine() -> None:
    with pytest.raises(RoleConfigError, match="actor needs a trainable engine"):
        ActorRole(FSDPEngine.from_config(engine_config(optimizer=None)), algorithm())


@pytest.mark.parametrize(
    ("settings", "skips"),
    [
        ({}, True),
        ({"entropy_coef": 0.01}, False),
        ({"policy_loss": "gspo"}, False),
        ({"kl_coef": 0.1}, False),
        ({"policy_loss": "ppo", "max_staleness": 1}, False),  # stale samples: every row's rollout gap is reported
    ],
)
def test_actor_skips_inert_rows_only_under_a_loss_that_reads_them_through_a_ratio_of_one(
    settings: dict, skips: bool, caplog: pytest.LogCaptureFixture
) -> None:
    engine = FSDPEngine.from_config(engine_config())
    with caplog.at_level("INFO", logger="rl_runtime.roles._actor"):
        assert ActorRole(engine, algorithm(skip_inert_rows=True, **settings)).skips_inert_forward is skips
    said = [record.getMessage() for record in caplog.records if "skip_inert_rows" in record.getMessage()]
    assert bool(said) is not skips, said  # a setting that cannot apply says why
    assert not ActorRole(engine, algorithm(**settings)).skips_inert_forward
