"""KL controllers: worked update sequences, exact checkpoint round trips, rejections."""

from __future__ import annotations

import json
import math

import pytest

from rl_core.kl import AdaptiveKLController, FixedKLController, KLController


def test_fixed_controller_never_moves() -> None:
    controller = FixedKLController(0.05)
    for current_kl, n_steps in [(100.0, 64), (0.0, 1), (-3.0, 0)]:
        controller.update(current_kl, n_steps)
    assert controller.value == 0.05


def test_adaptive_controller_follows_the_proportional_rule() -> None:
    controller = AdaptiveKLController(init_kl_coef=0.1, target_kl=6.0, horizon=10_000)
    # KL 9 is 50% over target: the error clips to +0.2; mult = 1 + 0.2 * 256 / 10000 = 1.00512.
    controller.update(9.0, 256)
    assert controller.value == pytest.approx(0.1 * 1.00512, rel=1e-15)
    # KL 3 is 50% under: the error clips to -0.2; mult = 1 - 0.2 * 512 / 10000 = 0.98976.
    controller.update(3.0, 512)
    assert controller.value == pytest.approx(0.1 * 1.00512 * 0.98976, rel=1e-15)
    # KL 6.6 is 10% over (inside the clip): mult = 1 + 0.1 * 1000 / 10000 = 1.01.
    controller.update(6.6, 1000)
    assert controller.value == pytest.approx(0.1 * 1.00512 * 0.98976 * 1.01, rel=1e-15)
    # On target, or an empty batch: no change.
    before = controller.value
    controller.update(6.0, 4096)
    controller.update(50.0, 0)
    assert controller.value == before


def test_adaptive_controller_with_zero_coefficient_stays_at_zero() -> None:
    controller = AdaptiveKLController(0.0, target_kl=1.0, horizon=100)
    controller.update(5.0, 10)
    assert controller.value == 0.0


def test_controllers_satisfy_the_protocol() -> None:
    assert isinstance(FixedKLController(0.1), KLController)
    assert isinstance(AdaptiveKLController(0.1, 1.0, 10.0), KLController)


def test_adaptive_state_round_trips_exactly_through_json() -> None:
    controller = AdaptiveKLController(0.2, target_kl=0.5, horizon=3000)
    for current_kl, n_steps in [(0.7, 128), (0.1, 128), (0.55, 100)]:
        controller.update(current_kl, n_steps)
    state = json.loads(json.dumps(controller.state_dict()))
    assert state == {"kl_coef": controller.value, "target_kl": 0.5, "horizon": 3000.0}

    resumed = AdaptiveKLController(1.0, target_kl=9.0, horizon=1.0)
    resumed.load_state_dict(state)
    assert (resumed.value, resumed.target_kl, resumed.horizon) == (controller.value, 0.5, 3000.0)
    for current_kl, n_steps in [(0.9, 64), (0.2, 32)]:
        controller.update(current_kl, n_steps)
        resumed.update(current_kl, n_steps)
        assert resumed.value == controller.value


def test_fixed_state_round_trips() -> None:
    resumed = FixedKLController(0.0)
    resumed.load_state_dict(FixedKLController(0.3).state_dict())
    assert resumed.value == 0.3
    assert resumed.state_dict() == {"kl_coef": 0.3}


def test_state_dict_is_a_copy() -> None:
    controller = AdaptiveKLController(0.2, 0.5, 100)
    controller.state_dict()["kl_coef"] = 99.0
    assert controller.value == 0.2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"init_kl_coef": -0.1, "target_kl": 1.0, "horizon": 10}, "init_kl_coef must be >= 0, got -0.1"),
        ({"init_kl_coef": math.nan, "target_kl": 1.0, "horizon": 10}, "init_kl_coef must be a finite number"),
        ({"init_kl_coef": 0.1, "target_kl": 0.0, "horizon": 10}, "target_kl must be > 0, got 0.0"),
        ({"init_kl_coef": 0.1, "target_kl": 1.0, "horizon": 0}, "horizon must be > 0, got 0"),
        ({"init_kl_coef": 0.1, "target_kl": 1.0, "horizon": -5}, "horizon must be > 0, got -5"),
        ({"init_kl_coef": 0.1, "target_kl": 1.0, "horizon": math.inf}, "horizon must be a finite number"),
        ({"init_kl_coef": "0.1", "target_kl": 1.0, "horizon": 10}, "init_kl_coef must be a finite number, got '0.1'"),
    ],
)
def test_adaptive_rejects_bad_parameters(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AdaptiveKLController(**kwargs)


@pytest.mark.parametrize(
    ("value", "message"),
    [(-1.0, "kl_coef must be >= 0, got -1.0"), (True, "kl_coef must be a finite number, got True")],
)
def test_fixed_rejects_bad_coefficients(value: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FixedKLController(value)


@pytest.mark.parametrize("controller", [FixedKLController(0.1), AdaptiveKLController(0.1, 1.0, 1000)], ids=repr)
@pytest.mark.parametrize(
    ("current_kl", "n_steps", "message"),
    [
        (math.nan, 4, "current_kl must be a finite number, got nan"),
        (None, 4, "current_kl must be a finite number, got None"),
        (0.1, -1, "n_steps must be an int >= 0, got -1"),
        (0.1, 2.5, "n_steps must be an int >= 0, got 2.5"),
        (0.1, True, "n_steps must be an int >= 0, got True"),
    ],
)
def test_update_rejects_bad_arguments(controller: KLController, current_kl, n_steps, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        controller.update(current_kl, n_steps)


def test_adaptive_refuses_a_step_that_could_flip_the_coefficient_sign() -> None:
    # With n_steps >= horizon / 0.2 a KL below target would give mult = 1 - 0.2 * n / horizon <= 0.
    controller = AdaptiveKLController(0.1, target_kl=1.0, horizon=100)
    with pytest.raises(ValueError, match=r"n_steps must be < horizon / 0.2 = 500, got 500; raise horizon"):
        controller.update(0.0, 500)
    controller.update(0.0, 499)
    assert controller.value == pytest.approx(0.1 * (1 - 0.2 * 499 / 100), rel=1e-15)


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({"kl_coef": 0.1, "target_kl": 1.0}, r"exactly the keys \['horizon', 'kl_coef', 'target_kl'\], got"),
        ({"kl_coef": 0.1, "target_kl": 1.0, "horizon": 5, "extra": 1}, "exactly the keys"),
        ({"kl_coef": -0.1, "target_kl": 1.0, "horizon": 5}, "kl_coef must be >= 0"),
        ({"kl_coef": 0.1, "target_kl": 1.0, "horizon": 0}, "horizon must be > 0"),
    ],
)
def test_adaptive_load_rejects_bad_state_and_keeps_its_own(state: dict, message: str) -> None:
    controller = AdaptiveKLController(0.2, 0.5, 100)
    with pytest.raises(ValueError, match=message):
        controller.load_state_dict(state)
    assert controller.state_dict() == {"kl_coef": 0.2, "target_kl": 0.5, "horizon": 100.0}


def test_fixed_load_rejects_bad_state() -> None:
    with pytest.raises(ValueError, match=r"FixedKLController state must have exactly the keys \['kl_coef'\]"):
        FixedKLController(0.1).load_state_dict({"value": 0.1})
