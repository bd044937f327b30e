"""The RL roles: actor, critic and reference, each owning a `TrainEngine` and adding its loss and forward spec.

A role holds its engine (private); it is not a kind of engine. The same `FSDPEngine` class serves all three,
built with a value head (critic) or without an optimizer (reference). The engine computes (it plans its own
micro-batches and loss normaliser); the role decides what to compute: the policy loss, KL and entropy terms,
the clipped value loss, PPO epochs over the equal mini-batches a role splits the step's batch into. Node
operations talk to roles only: the update, checkpoints, weight publishing and the step count go through the role's
methods (`ActorRole.publish_weights`: the engine exports and sends its own weights). The roles' settings are the
run config's `algorithm` section (`AlgorithmConfig`) as it is, plus the sampler's temperature and the PPO epochs:
`ActorRole.from_config(run_config, engine)`.
"""

from rl_runtime.roles._actor import ActorRole
from rl_runtime.roles._critic import CriticRole
from rl_runtime.roles._errors import RoleError
from rl_runtime.roles._reference import ReferenceRole

__all__ = ["ActorRole", "CriticRole", "ReferenceRole", "RoleError"]
