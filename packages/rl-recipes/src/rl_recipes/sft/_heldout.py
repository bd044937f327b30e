"""Scoring the model being trained on unseen rows: its weights are copied into an `HFEngine` and evaluated."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from rl_engines.rollout import HFEngine, HFEngineConfig
from rl_engines.training import FSDPEngine
from rl_recipes.evaluation import EvalResult, evaluate_math
from rl_recipes.tasks import MathSample

_SOURCE_RANK = 0


class TrainingScorer:
    """Greedy exact match of the training engine's current weights on given rows, computed on rank 0.

    The rollout model is built once from the engine's config; before scoring a new step's weights the
    engine streams its full weights into it (the path an RL weight sync takes), so training state is never
    touched.
    """

    def __init__(self, engine: FSDPEngine, tokenizer: Any, *, max_new_tokens: int, seed: int) -> None:
        self._engine = engine
        self._tokenizer = tokenizer
        self._max_new_tokens = max_new_tokens
        self._seed = seed
        self._synced_step: int | None = None
        self._rollout: HFEngine | None = None
        if engine.rank == _SOURCE_RANK:
            from transformers import AutoModelForCausalLM

            with torch.random.fork_rng(devices=[]):  # the weights are overwritten; keep the caller's RNG as it was
                model = AutoModelForCausalLM.from_config(engine.hf_config)
            eos = (tokenizer.eos_token_id,)
            config = HFEngineConfig(seed=seed, eos_token_ids=eos, pad_token_id=tokenizer.pad_token_id)
            self._rollout = HFEngine(model, config)

    def score(self, step: int, samples: Sequence[MathSample]) -> EvalResult | None:
        """Score `samples` with the weights after `step`; every rank calls it, rank 0 gets the result."""
        if self._synced_step != step:
            for bucket in self._engine.export_weights():
                if self._rollout is not None:
                    self._rollout.update_weights_from_tensors(bucket)
            if self._rollout is not None:
                self._rollout.set_weight_version(step)
            self._synced_step = step
        if self._rollout is None:
            return None
        return evaluate_math(
            self._rollout, samples, self._tokenizer, max_new_tokens=self._max_new_tokens, seed=self._seed
        )

    def close(self) -> None:
        """Shut the rollout engine down."""
        if self._rollout is not None:
            self._rollout.shutdown()


def share_from_rank_zero(value: float | None) -> float | None:
    """`value` as rank 0 has it, on every rank (itself without a process group)."""
    if not (dist.is_available() and dist.is_initialized()):
        return value
    box = [value]
    dist.broadcast_object_list(box, src=_SOURCE_RANK)
    return box[0]
