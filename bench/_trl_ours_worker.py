"""Our side of `grpo_vs_trl.py`: the `grpo` recipe on the shared model and prompts, driven as `rl-recipes train` is.

Runs in the dev environment. The config is the packaged `grpo` recipe with the warm start off, the shared SFT
model and training rows, the benchmark's batch, completion length, learning rate and slots; the steps run through
the Trainer's session API (`Trainer(...).session()`, `run.steps(n)`) in calls of the recipe's
`trainer.steps_per_call` steps, which is what `rl-recipes train grpo` runs.
Each window reports its wall time and, from the step metrics, the completions and response tokens generated and
the mean of every `timing_s/*` metric.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from _trl_protocol import RUN, claim_stdout, receive_command, send

TIMING_PREFIX = "timing_s/"
RESPONSE_LENGTH = "response_length/mean"
PROMPT_LENGTH = "prompt_length/mean"
TOTAL_TOKENS = "perf/total_num_tokens"
SCORE = "critic/score/mean"
INERT_ROWS = "actor/inert_row_fraction"


def recipe_overrides(args: argparse.Namespace) -> list[str]:
    """The `grpo` recipe's overrides that put it on the benchmark's model, data, batch and slots."""
    return [
        "warm_start=null",
        f"actor.model.path={args.model}",
        f"data.train_files=[{args.train_file}]",
        "data.val_files=[]",
        f"data.seed={args.seed}",
        f"batch.prompts_per_step={args.prompts}",
        f"batch.samples_per_prompt={args.samples}",
        f"data.max_response_length={args.max_new_tokens}",
        f"rollout.max_new_tokens={args.max_new_tokens}",
        "rollout.temperature=1.0",
        "algorithm.kl.mode=none",
        "algorithm.kl.coef=0.0",
        f"actor.optimizer.lr={args.lr}",
        "actor.precision.param_dtype=float32",
        "actor.precision.compute_dtype=null",
        "placement.device=cpu",
        f"placement.slots={args.slots}",
        f"trainer.total_steps={args.max_steps}",
        "trainer.validate_before_train=false",
        "trainer.validate_every=0",
        "trainer.checkpoint_every=0",
        "trainer.resume=never",
        f"trainer.output_dir={args.output_dir}",
        "trainer.log_sinks=[jsonl]",
        f"trainer.seed={args.seed}",
        *args.override,
    ]


def generated(metrics: dict[str, float]) -> tuple[int, int]:
    """(completions, response tokens) of one step, from its metrics: the global batch's prompt+response token
    count over the mean prompt+response length gives the number of sequences."""
    per_sequence = metrics[PROMPT_LENGTH] + metrics[RESPONSE_LENGTH]
    completions = round(metrics[TOTAL_TOKENS] / per_sequence)
    return completions, round(completions * metrics[RESPONSE_LENGTH])


def window_report(seconds: float, steps: list[dict[str, float]], step_seconds: list[float]) -> dict[str, Any]:
    """What the driver gets for one window of steps."""
    counts = [generated(metrics) for metrics in steps]
    timings = sorted({key for metrics in steps for key in metrics if key.startswith(TIMING_PREFIX)})
    return {
        "seconds": seconds,
        "steps": len(steps),
        "completions": sum(completions for completions, _ in counts),
        "tokens": sum(tokens for _, tokens in counts),
        "reward_mean": statistics.fmean(metrics[SCORE] for metrics in steps),
        # the share of rows whose loss is 0 (a group that scored alike): the grpo recipe runs no forward for them
        "inert_row_fraction": statistics.fmean(metrics.get(INERT_ROWS, 0.0) for metrics in steps),
        "step_seconds": step_seconds,
        "timing": {key: statistics.fmean(metrics.get(key, 0.0) for metrics in steps) for key in timings},
    }


def phases_runtime_env(folder: Path) -> dict[str, Any]:
    """Ray's runtime_env that times update_actor's phases in every worker (`_update_actor_phases`)."""
    from _update_actor_phases import CPROFILE_ENV, DIR_ENV

    folder.mkdir(parents=True, exist_ok=True)
    bench = str(Path(__file__).resolve().parent)
    path = os.pathsep.join(p for p in (bench, os.environ.get("PYTHONPATH", "")) if p)
    env = {DIR_ENV: str(folder.resolve()), CPROFILE_ENV: os.environ.get(CPROFILE_ENV, "0"), "PYTHONPATH": path}
    return {"env_vars": env, "worker_process_setup_hook": "_update_actor_phases.install"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="HF model folder with its tokenizer")
    parser.add_argument("--train-file", type=Path, required=True, help="GSM8K-format jsonl")
    parser.add_argument("--output-dir", type=Path, required=True, help="run folder (metrics.jsonl)")
    parser.add_argument("--slots", type=int, required=True)
    parser.add_argument("--prompts", type=int, required=True, help="prompts per step")
    parser.add_argument("--samples", type=int, required=True, help="completions per prompt")
    parser.add_argument("--max-new-tokens", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--max-steps", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--override", action="append", default=[], help="one more recipe override (KEY=VALUE)")
    parser.add_argument("--phases-dir", type=Path, default=None, help="time update_actor's phases into this folder")
    args = parser.parse_args()
    protocol = claim_stdout()

    import ray

    from rl_recipes.recipes import get_recipe, load_recipe_config
    from rl_recipes.tasks import MathTaskFactory
    from rl_runtime.trainer import Trainer

    config = load_recipe_config("grpo", overrides=recipe_overrides(args))
    get_recipe("grpo").check(config)
    per_call = config.trainer.steps_per_call  # as `Trainer.fit` calls the workers
    # A Ray instance of this process's own (what the session starts when none is running), so that the workers
    # of each slot setting never join another process's cluster.
    os.environ.setdefault("RAY_worker_niceness", "0")  # as the Trainer does when it starts Ray itself
    ray.init(
        address="local",
        num_cpus=max(args.slots, os.cpu_count() or 1),
        include_dashboard=False,
        runtime_env=None if args.phases_dir is None else phases_runtime_env(args.phases_dir),
    )
    try:
        with Trainer(config, MathTaskFactory(config.task, str(config.tokenizer_path))).session() as run:
            send(protocol, {"ready": {"slots": args.slots, "ray": ray.__version__}})
            while (command := receive_command())["cmd"] == RUN:
                start = last = time.perf_counter()
                steps, step_seconds = [], []
                while len(steps) < int(command["steps"]):
                    chunk = run.steps(min(per_call, int(command["steps"]) - len(steps)))
                    now = time.perf_counter()
                    steps += chunk
                    step_seconds += [(now - last) / len(chunk)] * len(chunk)
                    last = now
                send(protocol, window_report(last - start, steps, step_seconds))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
