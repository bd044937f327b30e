"""Held-out evaluation of a math task: rl-runtime's one evaluation path (`evaluate_prompts`) with a `MathTask`
around the given tokenizer and rule reward, reported per prompt."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl_engines.rollout import HFEngine, HFEngineConfig, InferenceEngine, SamplingParams
from rl_recipes.rewards import RewardFunction, gsm8k_exact_match
from rl_recipes.tasks import GROUND_TRUTH_KEY, MathSample, MathTask, MathTaskConfig, load_tokenizer, reward_failures
from rl_runtime.evaluation import PASS_SCORE, evaluate_prompts
from rl_runtime.nodes import PromptItem

logger = logging.getLogger(__name__)

CORRECT_SCORE = PASS_SCORE
"""A response counts as correct for pass@k when its reward reaches this (exact match scores 0 or 1)."""
DEFAULT_REWARD_TIMEOUT_S = 5.0
DEFAULT_MAX_BATCH_SIZE = 256
"""Requests per forward batch of an engine built from a model folder."""


@dataclass(frozen=True)
class PromptResult:
    """One prompt's responses and their rewards."""

    index: int
    """The sample's row index in its dataset."""
    question: str
    ground_truth: str
    responses: tuple[str, ...]
    """Decoded responses, special tokens removed."""
    scores: tuple[float, ...]

    @property
    def num_correct(self) -> int:
        """Responses whose reward reaches `CORRECT_SCORE`."""
        return sum(score >= CORRECT_SCORE for score in self.scores)


@dataclass(frozen=True)
class EvalResult:
    """Scores of an evaluation over `num_prompts` prompts with `samples_per_prompt` responses each."""

    mean_reward: float
    """Reward averaged over every response (held-out exact match for `gsm8k_exact_match`)."""
    pass_at_k: float
    """The unbiased pass@k averaged over prompts."""
    k: int
    num_prompts: int
    samples_per_prompt: int
    num_reward_failures: int
    """Responses whose reward function raised, timed out or returned a non-number (scored 0)."""
    prompts: tuple[PromptResult, ...]
    seconds: float
    """Wall time of generation plus scoring."""


def _check_arguments(samples: Sequence[MathSample], samples_per_prompt: int, k: int, temperature: float) -> None:
    if not samples:
        raise ValueError("samples is empty; pass at least one MathSample to evaluate")
    if isinstance(samples_per_prompt, bool) or not isinstance(samples_per_prompt, int) or samples_per_prompt < 1:
        raise ValueError(f"samples_per_prompt must be an int >= 1, got {samples_per_prompt!r}")
    if not 1 <= k <= samples_per_prompt:
        raise ValueError(f"k must lie in [1, samples_per_prompt={samples_per_prompt}], got k={k}")
    if temperature == 0 and samples_per_prompt > 1:
        logger.warning("samples_per_prompt=%d with greedy decoding repeats one response per prompt", samples_per_prompt)


def _open_engine(model: str | Path, seed: int) -> HFEngine:
    folder = Path(model)
    if not (folder / "config.json").is_file():
        raise ValueError(
            f"model {str(folder)!r} is not a Hugging Face model folder (no config.json); pass a folder or an engine"
        )
    return HFEngine.from_config(
        HFEngineConfig(model_path=str(folder), seed=seed, max_batch_size=DEFAULT_MAX_BATCH_SIZE)
    )


def _load_tokenizer(model: object, tokenizer: Any) -> Any:
    if tokenizer is not None:
        return tokenizer
    if not isinstance(model, (str, Path)):
        raise ValueError("tokenizer is None; pass the tokenizer that goes with the engine")
    return load_tokenizer(model)


def evaluate_math(
    model: InferenceEngine | str | Path,
    samples: Sequence[MathSample],
    tokenizer: Any = None,
    *,
    max_new_tokens: int,
    samples_per_prompt: int = 1,
    temperature: float = 0.0,
    seed: int = 0,
    k: int | None = None,
    reward_fn: RewardFunction = gsm8k_exact_match,
    reward_timeout_s: float = DEFAULT_REWARD_TIMEOUT_S,
) -> EvalResult:
    """Generate `samples_per_prompt` responses per sample in one batched call and score them with `reward_fn`.

    Args:
        model: a Hugging Face model folder (served by an `HFEngine` built here and shut down after) or
            an engine with `generate` (left running).
        samples: the prompts' rows; each prompt is `build_prompt(question, tokenizer)`.
        tokenizer: encodes prompts and decodes responses; None loads the model folder's.
        max_new_tokens: generation budget per response; generation stops at the tokenizer's eos.
        samples_per_prompt: responses per prompt (n of pass@k).
        temperature: 0 decodes greedily; otherwise request `i` samples with its own seed `seed + i`.
        seed: base seed of the sampled requests (and of a folder engine's shared generator).
        k: pass@k's k, 1 <= k <= samples_per_prompt; None means samples_per_prompt.
        reward_fn: `fn(response_text, ground_truth, **extra) -> float`, run per response by `RewardRunner`.
        reward_timeout_s: per-response reward time limit.
    """
    k = samples_per_prompt if k is None else k
    _check_arguments(samples, samples_per_prompt, k, temperature)
    tokenizer = _load_tokenizer(model, tokenizer)
    task = MathTask(MathTaskConfig(reward_timeout_s=reward_timeout_s), tokenizer, reward_fn=reward_fn)
    items = [
        PromptItem(task.prompt_ids(sample.question), {GROUND_TRUTH_KEY: sample.ground_truth}) for sample in samples
    ]
    eos = getattr(tokenizer, "eos_token_id", None)
    sampling = SamplingParams(
        max_new_tokens=max_new_tokens, temperature=temperature, stop_token_ids=(eos,) if eos is not None else ()
    )
    started = time.perf_counter()
    engine = _open_engine(model, seed) if isinstance(model, (str, Path)) else model
    try:
        evaluation = evaluate_prompts(
            engine,
            task,
            items,
            samples_per_prompt=samples_per_prompt,
            sampling=sampling,
            seed_of=lambda index: None if temperature == 0 else seed + index,
            uid_of=lambda index: index,
            rid_of=lambda index: f"eval-{index}",
        )
    finally:
        if engine is not model:
            engine.shutdown()
    prompts = tuple(
        PromptResult(
            index=sample.index,
            question=sample.question,
            ground_truth=sample.ground_truth,
            responses=tuple(
                task.decode(ids)
                for ids in evaluation.response_ids[i * samples_per_prompt : (i + 1) * samples_per_prompt]
            ),
            scores=evaluation.prompt_scores(i),
        )
        for i, sample in enumerate(samples)
    )
    result = EvalResult(
        mean_reward=evaluation.mean_score,
        pass_at_k=evaluation.pass_at_k(k),
        k=k,
        num_prompts=len(prompts),
        samples_per_prompt=samples_per_prompt,
        num_reward_failures=reward_failures(evaluation.task_metrics),
        prompts=prompts,
        seconds=time.perf_counter() - started,
    )
    logger.info(
        "evaluated %d prompts x %d: mean reward %.4f, pass@%d %.4f (%.1f s)",
        result.num_prompts,
        samples_per_prompt,
        result.mean_reward,
        k,
        result.pass_at_k,
        result.seconds,
    )
    return result
