"""The "through the Trainer" rows of `rollout.py --trainer`: GRPO steps of one run with `rollout.engine: hf`, then
the same run with `rollout.engine: vllm` (where vllm is importable), and the rollout node's seconds per step.

Workload: `rollout.py`'s model (same config, fresh weights from the actor's init seed), 4 prompts x 4 samples a
step drawn from `rollout.py`'s 16 prompts, 64 sampled tokens each with EOS disabled, so every step generates
16 x 64 tokens like `rollout.py`'s batch (sampled at temperature 1, not greedy). One CPU slot, colocated: the
actor trains and syncs its weights into the engine after every update (by reference, verified by checksum).
Step 1 (engine start-up, first sync) is left out; medians over the other steps of `timing_s/rollout_actor` (the
generate node), `timing_s/actor_train` (update plus weight sync) and `timing_s/step`.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import statistics
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ray.cloudpickle

from rl_runtime.config import RunConfig, config_from_dict
from rl_runtime.nodes import PromptItem, ResponseSample, ScoreResult
from rl_runtime.trainer import Trainer

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import bench modules

PROMPTS_PER_STEP, SAMPLES_PER_PROMPT, NEW_TOKENS = 4, 4, 64
NODES = {"rollout": "timing_s/rollout_actor", "train+sync": "timing_s/actor_train", "step": "timing_s/step"}
_TARGET = "target"


class CountTask:
    """Rows hold prompt token ids; a response scores 1 when it holds the row's target token (a reward to learn)."""

    def encode(self, row: Mapping[str, Any], where: str) -> PromptItem:
        return PromptItem(tuple(row["prompt_ids"]), {_TARGET: row[_TARGET]})

    def score(self, samples: Sequence[ResponseSample]) -> ScoreResult:
        scores = tuple(1.0 if sample.extras[_TARGET] in sample.response_ids else 0.0 for sample in samples)
        return ScoreResult(scores, {})

    def decode(self, token_ids: Sequence[int]) -> str:
        return " ".join(map(str, token_ids))


def skip_reason() -> str | None:
    """Why the vLLM row is left out (vllm not importable), or None."""
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed here; run with the `nox -s vllm` venv"
    return None


def _config(folder: Path, engine: str, hf_config: dict[str, Any], prompts: list[list[int]], steps: int) -> RunConfig:
    rows = folder / "prompts.jsonl"
    rows.write_text("".join(json.dumps({"prompt_ids": p, _TARGET: 7}) + "\n" for p in prompts))
    data = {
        "data": {
            "train_files": [str(rows)],
            "max_prompt_length": max(len(p) for p in prompts),
            "max_response_length": NEW_TOKENS,
        },
        "batch": {"prompts_per_step": PROMPTS_PER_STEP, "samples_per_prompt": SAMPLES_PER_PROMPT},
        "algorithm": {"adv_estimator": "grpo", "kl": {"mode": "none", "coef": 0.0}},
        "actor": {
            "model": {"hf_config": hf_config, "init_seed": 0},
            "optimizer": {"lr": 1e-4, "weight_decay": 0.0},
            "micro_batch": {"max_tokens_per_micro_batch": 4096},
        },
        "rollout": {"engine": engine, "temperature": 1.0, "max_new_tokens": NEW_TOKENS},
        "placement": {"slots": 1, "device": "cpu"},
        "trainer": {
            "output_dir": str(folder / "run"),
            "total_steps": steps,
            "log_sinks": ["jsonl"],
            "validate_before_train": False,
            "resume": "never",
        },
    }
    if engine == "vllm":
        data["rollout"]["engine_kwargs"] = {"max_num_seqs": PROMPTS_PER_STEP * SAMPLES_PER_PROMPT}
    return config_from_dict(RunConfig, data)


def measure(hf_config: dict[str, Any], prompts: list[list[int]], steps: int) -> dict[str, dict[str, float]]:
    """Per engine ("hf", and "vllm" where importable): medians of NODES' seconds and generated tokens/s."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # read by the vLLM engine in the worker
    logging.getLogger("rl_runtime").setLevel(logging.WARNING)
    engines = ["hf"] + (["vllm"] if skip_reason() is None else [])
    out: dict[str, dict[str, float]] = {}
    for engine in engines:
        with tempfile.TemporaryDirectory(prefix=f"bench-trainer-{engine}-") as folder:
            result = Trainer(_config(Path(folder), engine, hf_config, prompts, steps), CountTask).fit()
        timed = result.history[1:]
        row = {name: statistics.median(m[key] for m in timed) for name, key in NODES.items()}
        tokens = statistics.median(m["response_length/mean"] for m in timed) * PROMPTS_PER_STEP * SAMPLES_PER_PROMPT
        row["tokens_per_s"] = tokens / row["rollout"]
        out[engine] = row
    return out
