"""The critic role around a value-head engine: the clipped value loss, updates towards the returns, refusals."""

from __future__ import annotations

import pytest
import torch

from rl_core.losses import LossNormalizer, clipped_value_loss
from rl_engines.training import FSDPEngine
from rl_runtime.config import ConfigError
from rl_runtime.roles import CriticRole, RoleError
from rl_runtime.roles._errors import RoleConfigError

from ._helpers import algorithm, concat, critic_engine, engine_config, fake_outputs, mini_batches, rollout_batch


def test_critic_loss_is_the_clipped_value_loss() -> None:
    critic = CriticRole(critic_engine(), algorithm(value_clip=0.2))
    batch = rollout_batch(3, seed=6)
    batch["values"] = torch.randn(batch["input_ids"].shape) * batch["response_mask"]
    batch["returns"] = torch.randn(batch["input_ids"].shape)
    outputs = fake_outputs(batch, seed=7)
    normalizer = LossNormalizer.from_mask(batch["response_mask"])
    loss, metrics = critic.objective(outputs, batch, normalizer)
    expected = clipped_value_loss(
        outputs.values, batch["values"], batch["returns"], batch["response_mask"], clip_range=0.2, normalizer=normalizer
    )
    torch.testing.assert_close(loss, expected.loss)
    assert metrics["critic/vf_clipfrac"] == expected.clipfrac


def test_critic_updates_move_values_towards_the_returns() -> None:
    critic = CriticRole(critic_engine(), algorithm(value_clip=None), ppo_epochs=8)
    [batch] = mini_batches((3,))
    mask = batch["response_mask"].bool()

    def error() -> float:
        return float((critic.compute_values(batch) - batch["returns"])[mask].square().mean())

    before = error()
    results = critic.update(batch)
    assert len(results) == 8 and not any(r.skipped for r in results)
    assert results[-1].loss < results[0].loss
    assert error() < before
    assert critic.compute_values(batch).shape == batch["input_ids"].shape


def test_critic_update_needs_no_old_log_probs() -> None:
    critic = CriticRole(critic_engine(), algorithm())
    minis = mini_batches((4, 5))
    for mini in minis:
        del mini["old_log_probs"]
    assert len(critic.update(concat(minis), num_mini_batches=2)) == 2


def test_critic_needs_a_value_head() -> None:
    with pytest.raises(RoleConfigError, match=r"set ModelConfig\.value_head=True"):
        CriticRole(FSDPEngine.from_config(engine_config()), algorithm())


def test_critic_needs_values_and_returns_in_the_batch() -> None:
    critic = CriticRole(critic_engine(), algorithm())
    batch = rollout_batch(2, seed=0)
    with pytest.raises(RoleError, match=r"critic needs batch keys \['values', 'returns'\]"):
        critic.update(batch)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"value_clip": 0.0}, r"value_clip: expected a finite number > 0, found 0\.0"),
        ({"loss_agg_mode": "sum"}, r"loss_agg_mode: expected a registered loss aggregation mode .*found 'sum'"),
    ],
)
def test_critic_loss_settings_are_refused_where_they_are_defined(kwargs: dict, message: str) -> None:
    # The critic reads the run config's algorithm section; its checks refuse a bad value loss before any role exists.
    with pytest.raises(ConfigError, match=message):
        algorithm(**kwargs)


def test_critic_refuses_bad_epochs() -> None:
    with pytest.raises(RoleConfigError, match=r"CriticRole: ppo_epochs must be an int >= 1 \(batch\.ppo_epochs\)"):
        CriticRole(critic_engine(), algorithm(), ppo_epochs=1.5)  # pyright: ignore[reportArgumentType]


def test_no_value_clip_is_an_infinite_clip_range() -> None:
    assert CriticRole(critic_engine(), algorithm(value_clip=None)).clip_range == float("inf")
