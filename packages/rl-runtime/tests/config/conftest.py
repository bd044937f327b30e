"""Raw config mappings shared by the config tests: the smallest valid one and one that sets every field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rl_core.testing import TOY_TASKS
from rl_runtime.testing import LAST_FRAME, TOY_ENV, register_embodied_doubles


@pytest.fixture
def minimal_data() -> dict[str, Any]:
    """The smallest valid run config: only the two required settings."""
    return {"data": {"train_files": ["train.jsonl"]}, "actor": {"model": {"path": "/models/policy"}}}


@pytest.fixture
def full_data() -> dict[str, Any]:
    """A run config in which every field of every section holds a value other than its default."""
    return {
        "pipeline": "ppo",
        "data": {
            "train_files": ["a.jsonl", "b.parquet"],
            "val_files": ["val.jsonl"],
            "prompt_key": "question",
            "max_prompt_length": 64,
            "max_response_length": 128,
            "seed": 7,
            "shuffle": False,
        },
        "batch": {
            "prompts_per_step": 6,
            "samples_per_prompt": 2,
            "mini_batches_per_step": 3,
            "ppo_epochs": 2,
            "balance_across_ranks": "groups",
        },
        "algorithm": {
            "adv_estimator": "gae",
            "adv_params": {"gamma": 0.99, "lam": 0.95},
            "policy_loss": "gspo",
            "policy_loss_params": {"clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4},
            "loss_agg_mode": "seq-mean-token-mean",
            "entropy_coef": 0.01,
            # kl.mode=in_reward and its target: test_full_config_sets_every_field_to_a_non_default_value sets them.
            "kl": {"mode": "none", "estimator": "k1", "coef": 0.05, "horizon": 500},
            "dynamic_sampling": {"epsilon": 0.01, "max_draws": 4},
            "overlong": {"buffer_length": 64, "penalty_factor": 0.5},
            "value_clip": 0.2,
            "rollout_correction": {"mode": "mis", "level": "sequence", "upper": 3.0, "lower": 0.5},
            "offload_reference": True,
            "recompute_old_log_prob": "always",
            "max_staleness": 2,
            "rule_reward_weight": 0.5,
        },
        "judge": {
            "engine": "server",
            "base_url": "http://10.0.0.9:30000",
            "tokenizer": "/models/judge",
            "template": "Grade: {prompt} -> {response}",
            "verdict": "number",
            "pattern": "score (\\d+)",
            "default_score": -1.0,
            "max_new_tokens": 4,
            "temperature": 0.5,
            "weight": 0.25,
        },
        "reward_model": {
            "path": "/models/rm",
            "tokenizer": "retokenize",
            "batch_size": 8,
            "weight": 0.5,
            "placement": "slot",
            "slots": 2,
            "max_length": 48,
        },
        "actor": {
            "model": {
                "path": "/models/actor",
                "tokenizer_path": "/models/tokenizer",
                "attn_implementation": "eager",
                "gradient_checkpointing": True,
                "fast_forward": False,
                "init_seed": 5,
                "broadcast_from_rank0": True,
            },
            "precision": {"param_dtype": "bfloat16", "compute_dtype": "float16", "reduce_dtype": "bfloat16"},
            "optimizer": {"lr": 3e-6, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.1, "max_grad_norm": None},
            "schedule": {"kind": "cosine", "warmup_steps": 3, "total_steps": 9, "min_lr_ratio": 0.1},
            "micro_batch": {
                "max_tokens_per_micro_batch": 1024,
                "packing": False,
                "logprob_chunk_size": 256,
                "share_prefixes": False,
            },
            "offload": {"fsdp_cpu_offload": True, "pin_memory": False},
            "reshard_after_forward": False,
        },
        "critic": {
            "model": {"hf_config": {"model_type": "llama", "hidden_size": 16, "num_attention_heads": 2}},
            "optimizer": {"lr": 1e-5},
            "micro_batch": {"max_tokens_per_micro_batch": 1024},
            "data_parallel": "ddp",
        },
        "reference": {"model": {"path": "/models/reference"}, "optimizer": None},
        "rollout": {
            "engine": "server",
            "servers": [f"http://10.0.0.{index}:30000" for index in range(1, 5)],
            "weight_sync": "disk",
            "temperature": 0.7,
            "top_p": 0.9,
            "top_k": 50,
            "max_new_tokens": 100,
            "val_samples_per_prompt": 4,
            "val_temperature": 0.6,
            "engine_kwargs": {"connect_attempts": 3, "timeout_s": 30.0},
            "workflow": f"{Path(__file__).parents[1] / 'nodes' / 'multi_turn_workflow.py'}:ToolEchoWorkflow",
            "workflow_kwargs": {"turns": 3},
            "episode_timeout_s": 60.0,
        },
        "placement": {
            "slots": 4,
            "slots_per_node": 2,
            "device": "cuda",
            "colocate": False,
            "strategy": "even",
            "node_cohesion": False,
            "node_load": False,
            "retain_host_memory": False,
        },
        "trainer": {
            "total_epochs": 3,
            "total_steps": 10,
            "validate_every": 5,
            "validate_before_train": False,
            "checkpoint_every": 2,
            "keep_last": 3,
            "resume": "/checkpoints/step_4",
            "output_dir": "/tmp/run",
            "take_over": True,
            "log_sinks": ["jsonl", "tensorboard", "wandb"],
            "project_name": "project",
            "experiment_name": "experiment",
            "seed": 11,
            "step_timeout_s": 120.0,
            "steps_per_call": 3,
            "launcher": "ray",
        },
    }


@pytest.fixture
def full_embodied_data(minimal_data: dict[str, Any]) -> dict[str, Any]:
    """An embodied run config whose embodied settings (env, embedder, reward, band) all differ from the defaults."""
    register_embodied_doubles()

    return {
        **minimal_data,
        "pipeline": "embodied_srpo",
        "algorithm": {
            "kl": {"mode": "none"},
            "reward": "srpo",
            "embodied_sampling": {"lower": 0.2, "upper": 0.8, "filter_truncated": True},
        },
        "env": {
            "name": TOY_ENV,
            "tasks": list(TOY_TASKS),
            "num_envs": 3,
            "max_steps": 9,
            "num_trials": 5,
            "seed": 4,
            "num_workers": 2,
            "step_timeout_s": 5.0,
            "options": {"size": 4},  # exercises the field only: this config is never built into an env
        },
        "embedder": {
            "name": LAST_FRAME,
            "path": "/models/embedder",
            "num_frames": 4,
            "dim": 96,
            "device": "cuda",
            "options": {"levels": 2},
        },
    }
