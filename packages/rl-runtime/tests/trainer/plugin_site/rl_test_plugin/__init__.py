"""A third-party plugin as an installed distribution would ship it: importing it registers a policy loss.

`rl_test_plugin-0.1.dist-info/entry_points.txt` declares it under the `rl_core.plugins` group; a process with
this folder on PYTHONPATH discovers it through `importlib.metadata`, as it would an installed package.
"""

from __future__ import annotations

import os

import torch

from rl_core.losses import LossNormalizer, PolicyLossInputs, PolicyLossOutput, ppo, register_policy_loss

LOSS_NAME = "test_plugin_ppo"


@register_policy_loss(LOSS_NAME)
def test_plugin_ppo(
    inputs: PolicyLossInputs,
    *,
    aggregation: str = "token-mean",
    normalizer: LossNormalizer | None = None,
    clip_ratio: float = 0.2,
) -> PolicyLossOutput:
    """`ppo`, plus a `plugin_pid` metric: the process that ran the loss (a DAG worker, never the driver)."""
    out = ppo(inputs, aggregation=aggregation, normalizer=normalizer, clip_ratio=clip_ratio)
    return PolicyLossOutput(out.loss, {**out.metrics, "plugin_pid": torch.tensor(float(os.getpid()))})
