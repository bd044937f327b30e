"""The training doubles in `rl_engines.testing` (shared by rl-engines' training tests and rl-runtime's role tests)
are public and pinned, and build what their docstrings promise."""

from __future__ import annotations

import torch

import rl_engines.testing as testing
from rl_core.losses import LossNormalizer
from rl_core.schema import ADVANTAGES, ATTENTION_MASK, INPUT_IDS, OLD_LOG_PROBS, POSITION_IDS, RESPONSE_MASK
from rl_engines.training import ForwardOutput, TrainEngineConfig

TRAINING_DOUBLES = [
    "TINY_PROMPT_LEN",
    "TINY_RESPONSE_LEN",
    "TINY_VOCAB",
    "ppo_loss_fn",
    "tiny_engine_config",
    "tiny_qwen_config",
    "tiny_rollout_batch",
    "with_ppo_fields",
]


def test_training_doubles_are_public() -> None:
    assert set(TRAINING_DOUBLES) <= set(testing.__all__)
    assert all(hasattr(testing, name) for name in TRAINING_DOUBLES)


def test_tiny_rollout_batch_is_laid_out_as_a_rollout() -> None:
    batch = testing.tiny_rollout_batch(3, seed=0)
    width = testing.TINY_PROMPT_LEN + testing.TINY_RESPONSE_LEN
    assert set(batch) == {INPUT_IDS, ATTENTION_MASK, POSITION_IDS, RESPONSE_MASK, OLD_LOG_PROBS, ADVANTAGES}
    assert all(tensor.shape == (3, width) for tensor in batch.values())
    response = batch[RESPONSE_MASK].bool()
    assert not response[:, : testing.TINY_PROMPT_LEN].any() and response.any(dim=1).all()
    assert bool((batch[ATTENTION_MASK].bool() | ~response).all())  # every response token is attended
    assert torch.equal(testing.tiny_rollout_batch(3, seed=0)[INPUT_IDS], batch[INPUT_IDS])  # seeded


def test_tiny_engine_config_runs_on_the_cpu_and_ppo_loss_fn_is_a_loss() -> None:
    config = testing.tiny_engine_config()
    assert isinstance(config, TrainEngineConfig) and config.device == "cpu"
    assert config.model.hf_config.vocab_size == testing.TINY_VOCAB
    batch = testing.tiny_rollout_batch(2, seed=1)
    log_probs = batch[OLD_LOG_PROBS].clone().requires_grad_()
    loss, metrics = testing.ppo_loss_fn(
        ForwardOutput(log_probs, None, None), batch, LossNormalizer.from_mask(batch[RESPONSE_MASK])
    )
    assert loss.requires_grad and "pg_clipfrac" in metrics
