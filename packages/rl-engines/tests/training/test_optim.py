"""AdamW construction and the warm-up + constant/cosine learning-rate schedules."""

from __future__ import annotations

import math

import pytest
import torch

from rl_engines.training import OptimizerConfig, ScheduleConfig
from rl_engines.training._optim import build_optimizer, build_scheduler, lr_multiplier


def test_constant_with_warmup_follows_verl() -> None:
    multiplier = lr_multiplier(ScheduleConfig(kind="constant", warmup_steps=4))
    assert [multiplier(step) for step in range(6)] == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]


def test_cosine_decays_from_the_peak_to_the_floor() -> None:
    multiplier = lr_multiplier(ScheduleConfig(kind="cosine", warmup_steps=2, total_steps=12, min_lr_ratio=0.1))
    assert multiplier(0) == 0.0
    assert multiplier(2) == pytest.approx(1.0)
    assert multiplier(7) == pytest.approx(0.1 + 0.9 * 0.5)
    assert multiplier(12) == pytest.approx(0.1)
    assert multiplier(50) == pytest.approx(0.1)
    values = [multiplier(step) for step in range(2, 13)]
    assert values == sorted(values, reverse=True)


def test_scheduler_scales_the_optimizer_rate() -> None:
    parameter = torch.nn.Parameter(torch.zeros(3))
    optimizer = build_optimizer([parameter], OptimizerConfig(lr=0.5))
    scheduler = build_scheduler(optimizer, ScheduleConfig(kind="cosine", warmup_steps=1, total_steps=3))
    rates = []
    for _ in range(4):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates == pytest.approx([0.0, 0.5, 0.25, 0.0], abs=1e-12)
    assert scheduler.state_dict()["last_epoch"] == 4


def test_optimizer_skips_frozen_parameters_and_uses_the_settings() -> None:
    trained, frozen = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2), requires_grad=False)
    optimizer = build_optimizer([trained, frozen], OptimizerConfig(lr=1e-3, betas=(0.8, 0.9), weight_decay=0.0))
    group = optimizer.param_groups[0]
    assert group["params"] == [trained]
    assert (group["lr"], group["betas"], group["weight_decay"]) == (1e-3, (0.8, 0.9), 0.0)
    assert group["fused"]  # CPU parameters take the fused kernel too
    assert math.isclose(group["eps"], 1e-8)


def test_cpu_optimizer_takes_fused_steps_equal_to_the_per_tensor_loop() -> None:
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(5, 3)), torch.nn.Parameter(torch.randn(7))]
    reference = [torch.nn.Parameter(p.detach().clone()) for p in params]
    config = OptimizerConfig(lr=1e-2, weight_decay=0.1)
    ours = build_optimizer(params, config)
    loop = torch.optim.AdamW(reference, lr=1e-2, betas=config.betas, eps=config.eps, weight_decay=0.1, foreach=False)
    assert ours.defaults["fused"] is True
    for step in range(3):
        for p, r in zip(params, reference, strict=True):
            p.grad = torch.full_like(p, 0.5 + step)
            r.grad = p.grad.clone()
        ours.step()
        loop.step()
    for p, r in zip(params, reference, strict=True):
        torch.testing.assert_close(p, r, rtol=0, atol=2e-7)
