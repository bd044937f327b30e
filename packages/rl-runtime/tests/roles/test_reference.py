"""The reference role around a frozen engine: its log-probs, offloading between uses, refusals."""

from __future__ import annotations

import pytest
import torch

from rl_engines.training import ForwardSpec, FSDPEngine, TrainConfigError
from rl_runtime.roles import ReferenceRole
from rl_runtime.roles._errors import RoleConfigError

from ._helpers import algorithm, engine_config, rollout_batch


@pytest.mark.parametrize("offload", [False, True])
def test_reference_log_probs_equal_the_initial_policy(offload: bool) -> None:
    engine = FSDPEngine.from_config(engine_config(optimizer=None))
    reference = ReferenceRole(engine, algorithm(offload_reference=offload))
    policy = FSDPEngine.from_config(engine_config())
    batch = rollout_batch(4, seed=8)
    ref = reference.compute_ref_log_probs(batch)
    assert not hasattr(reference, "engine")  # the role owns its engine; callers go through the role
    torch.testing.assert_close(ref, policy.forward(batch, ForwardSpec()).log_probs, atol=1e-6, rtol=0)
    assert not any(p.requires_grad for p in engine.network.parameters())
    if offload:  # offloaded again after use: a direct forward must ask for onload first
        with pytest.raises(TrainConfigError, match=r"engine is offloaded to the CPU; call onload\(\) first"):
            engine.forward(batch, ForwardSpec())
        assert torch.equal(reference.compute_ref_log_probs(batch), ref)


def test_reference_must_be_frozen() -> None:
    with pytest.raises(RoleConfigError, match="reference model must be frozen"):
        ReferenceRole(FSDPEngine.from_config(engine_config()), algorithm())
    frozen = FSDPEngine.from_config(engine_config(optimizer=None))
    with pytest.raises(RoleConfigError, match=r"ReferenceRole: temperature must be a finite number > 0"):
        ReferenceRole(frozen, algorithm(), temperature=-1.0)
