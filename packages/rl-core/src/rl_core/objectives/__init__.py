"""Training objectives composed from the registered pieces: `PolicyObjective`, the actor's whole loss (a policy loss
by name with its parameters, optionally rollout-corrected, plus the KL-to-reference loss and the entropy bonus, every
term aggregated with one mode over the step's normaliser), built once from names and numbers and called by a training
engine on each micro-batch."""

from rl_core.objectives._policy import PolicyObjective, PolicyOutputs

__all__ = ["PolicyObjective", "PolicyOutputs"]
