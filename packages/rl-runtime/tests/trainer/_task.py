"""A token-level test double of a recipe's task, and a tiny run config around it."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ray.cloudpickle

from rl_runtime.config import RunConfig, config_from_dict
from rl_runtime.nodes import PromptItem, ResponseSample, ScoreResult

# Workers cannot import test modules: ship this one's classes by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

VOCAB = 64
TARGET_KEY = "target"
HF_CONFIG: Mapping[str, Any] = {
    "model_type": "qwen2",
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": VOCAB,
    "max_position_embeddings": 32,
}
"""The tiny Qwen2 of `tiny_config`'s actor (no EOS token: every response runs to `rollout.max_new_tokens`)."""


class TokenTask:
    """Test double of a recipe task: rows hold prompt token ids; a response scores 1 when it contains the
    row's target token, else 0."""

    def encode(self, row: Mapping[str, Any], where: str) -> PromptItem:
        return PromptItem(tuple(row["prompt_ids"]), {TARGET_KEY: row[TARGET_KEY]})

    def score(self, samples: Sequence[ResponseSample]) -> ScoreResult:
        scores = tuple(1.0 if sample.extras[TARGET_KEY] in sample.response_ids else 0.0 for sample in samples)
        return ScoreResult(scores, {"reward/hit_rate": sum(scores) / len(scores)})

    def decode(self, token_ids: Sequence[int]) -> str:
        return " ".join(map(str, token_ids))


def write_rows(path: Path, count: int, seed: int) -> Path:
    """`count` rows of 3-6 random prompt tokens and a target token, as jsonl."""
    rng = random.Random(seed)
    rows = [
        {"prompt_ids": [rng.randrange(4, VOCAB) for _ in range(rng.randint(3, 6))], TARGET_KEY: rng.randrange(4, 12)}
        for _ in range(count)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def tiny_config(
    folder: Path,
    *,
    placement: Mapping[str, Any] | None = None,
    actor: Mapping[str, Any] | None = None,
    algorithm: Mapping[str, Any] | None = None,
    pipeline: str = "grpo",
    rollout: Mapping[str, Any] | None = None,
    reward_model: Mapping[str, Any] | None = None,
    critic: Mapping[str, Any] | None = None,
    data: Mapping[str, Any] | None = None,
    **trainer: Any,
) -> RunConfig:
    """A 2-slot GRPO config of a 2-layer Qwen2, 4 prompts x 4 samples, 8 new tokens; colocated unless `placement`
    overrides it; `actor` adds to the actor section, `algorithm` to the algorithm section, `rollout` to the rollout
    section, `trainer` to the trainer section; `reward_model` is the reward_model section (none by default);
    `critic` is the critic section (none by default), `pipeline` replaces grpo; `data` adds to the data section."""
    folder.mkdir(parents=True, exist_ok=True)
    train = write_rows(folder / "train.jsonl", 32, seed=1)
    val = write_rows(folder / "val.jsonl", 6, seed=2)
    data = {
        "data": {
            "train_files": [str(train)],
            "val_files": [str(val)],
            "max_prompt_length": 8,
            "max_response_length": 8,
            **(data or {}),
        },
        "batch": {
            "prompts_per_step": 4,
            "samples_per_prompt": 4,
            "mini_batches_per_step": 2,
        },
        "algorithm": {"adv_estimator": "grpo", "kl": {"mode": "as_loss", "coef": 0.01}, **(algorithm or {})},
        "actor": {
            "model": {"hf_config": dict(HF_CONFIG), "init_seed": 3},
            "optimizer": {"lr": 1e-3, "weight_decay": 0.0},
            "micro_batch": {"max_tokens_per_micro_batch": 64},
            **(actor or {}),
        },
        "rollout": {"temperature": 1.0, "max_new_tokens": 8, **(rollout or {})},
        "placement": {"slots": 2, "device": "cpu", **(placement or {})},
        "trainer": {
            "output_dir": str(folder / "run"),
            "log_sinks": ["jsonl"],
            "validate_before_train": False,
            **trainer,
        },
        "pipeline": pipeline,
        **({"reward_model": dict(reward_model)} if reward_model is not None else {}),
        **({"critic": dict(critic)} if critic is not None else {}),
    }
    return config_from_dict(RunConfig, data)
