"""Checks a run makes before its workers start: the reward model folder loads and reads the policy's tokens."""

from __future__ import annotations

import logging
from pathlib import Path

from rl_engines.reward_model._config import RewardModelConfig, TokenizerMode
from rl_engines.reward_model._scorer import RewardModelError, check_folder, load_reward_tokenizer
from rl_engines.training import ModelConfig, load_hf_config

logger = logging.getLogger(__name__)

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def policy_tokenizer_folder(model: ModelConfig) -> Path | None:
    """The folder of the policy's tokenizer: `tokenizer_path`, else `path` when it holds a tokenizer, else None."""
    if model.tokenizer_path is not None:
        return Path(model.tokenizer_path)
    if model.path is not None and any((Path(model.path) / name).is_file() for name in _TOKENIZER_FILES):
        return Path(model.path)
    return None


def check_reward_model(config: RewardModelConfig, policy: ModelConfig) -> None:
    """Raise `RewardModelError` unless `config.path` is a one-label model folder and, with `tokenizer: same`, its
    vocabulary equals the policy's (`policy`: the actor's model): the policy's tokenizer when it has a folder, else
    its model's vocab_size (then only the sizes are compared, and a warning says so)."""
    from transformers import AutoConfig

    folder = check_folder(config.path)
    hf_config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    labels = int(getattr(hf_config, "num_labels", 0))
    if labels != 1:
        raise RewardModelError(
            f"reward_model.path={config.path!r} has num_labels={labels}; a reward model has exactly one label"
        )
    if config.tokenizer is not TokenizerMode.SAME:
        return
    fix = "set reward_model.tokenizer=retokenize to score the decoded text with the reward model's own tokenizer"
    policy_tokenizer = policy_tokenizer_folder(policy)
    if policy_tokenizer is None:
        rm_size = int(hf_config.vocab_size)
        policy_vocab_size = int(load_hf_config(policy).get_text_config().vocab_size)
        if rm_size != policy_vocab_size:
            raise RewardModelError(
                f"reward_model.tokenizer=same, but the reward model's vocab_size is {rm_size} and the policy's "
                f"{policy_vocab_size}; {fix}"
            )
        logger.warning("reward_model.tokenizer=same: the policy has no tokenizer folder, only vocab sizes compared")
        return
    rm_vocab = load_reward_tokenizer(folder).get_vocab()
    policy_vocab = load_reward_tokenizer(policy_tokenizer).get_vocab()
    if rm_vocab != policy_vocab:
        differing = sorted(set(rm_vocab.items()) ^ set(policy_vocab.items()))[:3]
        raise RewardModelError(
            f"reward_model.tokenizer=same, but the reward model's tokenizer ({len(rm_vocab)} tokens, in "
            f"{str(folder)!r}) differs from the policy's ({len(policy_vocab)} tokens, in {str(policy_tokenizer)!r}), "
            f"e.g. (token, id) {differing}; {fix}"
        )
