"""Held-out evaluation, one path for the Trainer's validation and the recipes' scoring: `evaluate_prompts`
samples each prompt k times through a rollout engine and the task scores the responses; the `Evaluation` it
returns gives mean score, pass@k and the totals the Trainer reduces across workers into `val/*` metrics
(`_evaluate.reduce_validation`).

    evaluation = evaluate_prompts(engine, task, items, samples_per_prompt=4, sampling=sampling, seed_of=seeds)
    evaluation.mean_score, evaluation.pass_at_k(1)
"""

from rl_runtime.evaluation._evaluate import PASS_SCORE, Evaluation, evaluate_prompts
from rl_runtime.evaluation._pass_at_k import pass_at_k

__all__ = ["PASS_SCORE", "Evaluation", "evaluate_prompts", "pass_at_k"]
