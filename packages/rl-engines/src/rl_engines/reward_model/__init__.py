"""Reward models: a one-label sequence classifier scoring prompt + response, its config and load-time checks.

`RewardModelScorer.from_config(RewardModelConfig(path=...))` loads an `AutoModelForSequenceClassification` folder
(as `rl-recipes rm` writes) and scores token-id sequences (`score_ids`, the policy's own ids when the vocabularies
match) or texts (`score_texts`, re-tokenised with the reward model's tokenizer); `RewardScorer` is the protocol
the reward node calls, which a reward model on a slot of its own (the runtime's) satisfies too. The run config's
`reward_model` section is `RewardModelConfig` as it is; the runtime's reward node adds the scores to the sequence
reward.
"""

from rl_engines.reward_model._checks import check_reward_model, policy_tokenizer_folder
from rl_engines.reward_model._config import RewardModelConfig, RewardModelPlacement, TokenizerMode
from rl_engines.reward_model._protocol import RewardScorer
from rl_engines.reward_model._scorer import RewardModelError, RewardModelScorer, RewardScores, load_reward_tokenizer

__all__ = [
    "RewardModelConfig",
    "RewardModelError",
    "RewardModelPlacement",
    "RewardModelScorer",
    "RewardScorer",
    "RewardScores",
    "TokenizerMode",
    "check_reward_model",
    "load_reward_tokenizer",
    "policy_tokenizer_folder",
]
