"""Training objectives composed from the registered pieces, built once from names and numbers and called by a
training engine on each micro-batch: `PolicyObjective`, the actor's whole loss (a policy loss by name with its
parameters, optionally rollout-corrected, plus the KL-to-reference loss and the entropy bonus, every term aggregated
with one mode over the step's normaliser), and `ValueObjective`, the critic's clipped value loss."""

from rl_core.objectives._policy import PolicyObjective, PolicyOutputs
from rl_core.objectives._value import ValueObjective, ValueOutputs

__all__ = ["PolicyObjective", "PolicyOutputs", "ValueObjective", "ValueOutputs"]
