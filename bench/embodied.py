"""Env steps/s of `EnvPool` (1, 2, 4 spawned workers) vs the single-process `LocalVectorEnv`, BabyAI, random actions.

Each (env count, workers) pair runs whole episodes: reset every env to its own (task 0, trial i) seed, then step all
active envs with random chunks of `--chunk` actions until every episode ended; env steps are the executed steps
(sum of finish_step). Sides alternate (local, pool, local, pool, ...) and medians over `--rounds` are reported,
because the 2-core dev machines drift between runs; worker start-up (spawn imports torch) is outside the timing.
The CPU count and load average are printed first and in the RESULT line: with other work on the cores, the
workers cannot run in parallel and the ratio says nothing about the pool.
The RESULT line's ratio is 2 workers over the local loop at the largest env count; goal >= 1.6x.

Then the rollout share of an SRPO step: a short real `rl-recipes train srpo` run (tiny warm start, `--srpo-steps`
steps of 4 trials x 4 episodes, no validation) with the envs in the rollout worker's process (`env.num_workers=0`)
and again in a pool of 2 workers; the share is `timing_s/rollout_actor` over `timing_s/step`, the median over the
steps after the first (the first pays for start-up). `--srpo-steps 0` skips it.

    python bench/embodied.py              # ~2-3 min on 2 cores; --help for the options
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from rl_core.envs import EnvConfig, EnvPool, LocalVectorEnv, VectorEnv
from rl_recipes.environments import babyai_factory, babyai_spec

DEFAULT_LEVEL = "GoToLocal"
"""The pool rows' default level (bench/README.md's figures were taken on it); the SRPO step runs the recipe's own
env (configs/srpo.yaml)."""

GOAL = 1.6
ROLLOUT_KEY = "timing_s/rollout_actor"
STEP_KEY = "timing_s/step"


def _srpo_overrides(folder: Path, steps: int, workers: int) -> list[str]:
    """A short SRPO run into `folder`: tiny warm start, 4 trials x 4 episodes a step, no validation or strip."""
    return [
        f"warm_start.output_dir={folder}/warm_start",
        f"actor.model.path={folder}/warm_start/model",
        "warm_start.steps=10",
        "warm_start.num_demos=4",
        f"data.train_files=[{folder}/pools/train.jsonl]",
        "data.val_files=[]",
        "train_trials=4",
        "heldout_trials=0",
        "strip_episodes=0",
        "env.num_trials=4",
        "env.num_envs=16",
        f"env.num_workers={workers}",
        "batch.prompts_per_step=4",
        "batch.samples_per_prompt=4",
        f"trainer.total_steps={steps}",
        "trainer.validate_before_train=false",
        f"trainer.validate_every={steps}",
        f"trainer.checkpoint_every={steps}",
        "trainer.log_sinks=[jsonl]",
        f"trainer.output_dir={folder}/run",
    ]


def _srpo_rollout_share(steps: int, workers: int) -> tuple[float, float, float]:
    """Median rollout seconds, step seconds and rollout share over steps 2..`steps` of a short SRPO run."""
    from rl_recipes.recipes import get_recipe, load_recipe_config, run_recipe

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    with tempfile.TemporaryDirectory(prefix="bench_srpo_") as folder:
        config = load_recipe_config("srpo", overrides=_srpo_overrides(Path(folder), steps, workers))
        history = run_recipe(get_recipe("srpo"), config).train.history[1:]
    rollout = statistics.median(m[ROLLOUT_KEY] for m in history)
    step = statistics.median(m[STEP_KEY] for m in history)
    return rollout, step, statistics.median(m[ROLLOUT_KEY] / m[STEP_KEY] for m in history)


async def _episodes(env: VectorEnv, num_envs: int, chunk: int, gen: torch.Generator) -> int:
    """Run one episode on each of `num_envs` envs; return the env steps executed."""
    obs = await env.reset([0] * num_envs, list(range(num_envs)))
    active = list(range(num_envs))
    steps = torch.zeros(num_envs, dtype=torch.int64)
    while active:
        actions = torch.randint(0, env.spec.action_bins, (len(active), chunk, 1), generator=gen)
        obs = await env.step(active, actions)
        steps[list(obs.indices)] = obs.finish_step
        active = [i for i, on in zip(obs.indices, obs.active.tolist(), strict=True) if on]
    return int(steps.sum())


def _rate(env: VectorEnv, num_envs: int, chunk: int, seconds: float, seed: int) -> float:
    """Env steps/s over whole rounds of episodes lasting at least `seconds`."""
    gen = torch.Generator().manual_seed(seed)
    total, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        total += asyncio.run(_episodes(env, num_envs, chunk, gen))
    return total / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 16], help="env counts")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4], help="pool worker counts")
    parser.add_argument("--level", default=DEFAULT_LEVEL, help="BabyAI level of the pool rows")
    parser.add_argument("--chunk", type=int, default=4, help="env steps per policy step (action chunk K)")
    parser.add_argument("--max-steps", type=int, default=64, help="episode length limit")
    parser.add_argument("--rounds", type=int, default=3, help="alternating measurements per side")
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one measurement")
    parser.add_argument("--srpo-steps", type=int, default=4, help="steps of each short SRPO run; 0 skips them")
    args = parser.parse_args()
    torch.set_num_threads(1)

    ratios: dict[tuple[int, int], float] = {}
    load_start = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load_start:.1f} at start (a ratio needs 2 idle cores to show)")
    print(f"BabyAI {args.level}, chunk {args.chunk}, max_steps {args.max_steps}; env steps/s, medians of {args.rounds}")
    print(f"{'envs':>5} {'workers':>8} {'local':>9} {'pool':>9} {'ratio':>7}")
    for num_envs in args.envs:
        config = EnvConfig(
            name="babyai", tasks=(args.level,), num_envs=num_envs, max_steps=args.max_steps, num_trials=num_envs
        )
        spec, factory = babyai_spec(config), babyai_factory(config)
        local = LocalVectorEnv(spec, factory, num_envs)
        for workers in args.workers:
            if workers > num_envs:
                continue
            pool = EnvPool(spec, factory, num_envs, workers, step_timeout_s=60)
            try:
                _rate(pool, num_envs, args.chunk, 0.2, 0)  # start-up and warm-up
                _rate(local, num_envs, args.chunk, 0.2, 0)
                local_rates, pool_rates = [], []
                for r in range(args.rounds):
                    local_rates.append(_rate(local, num_envs, args.chunk, args.seconds, r))
                    pool_rates.append(_rate(pool, num_envs, args.chunk, args.seconds, r))
            finally:
                pool.close()
            a, b = statistics.median(local_rates), statistics.median(pool_rates)
            ratios[(num_envs, workers)] = b / a
            print(f"{num_envs:>5} {workers:>8} {a:>9.0f} {b:>9.0f} {b / a:>7.2f}", flush=True)
            if workers == 2 and num_envs == max(args.envs):
                headline = (b, b / a)
        local.close()
    if (max(args.envs), 2) not in ratios:
        raise SystemExit("the RESULT line needs --workers to include 2")
    rate, ratio = headline
    shares = ""
    if args.srpo_steps > 1:
        print(f"SRPO step (the recipe's env, configs/srpo.yaml; 16 envs), medians of steps 2..{args.srpo_steps}")
        print(f"{'env loop':>16} {'rollout s':>10} {'step s':>8} {'rollout share':>14}")
        for workers, label in ((0, "local"), (2, "pool2")):
            rollout, step, share = _srpo_rollout_share(args.srpo_steps, workers)
            print(f"{label:>16} {rollout:>10.2f} {step:>8.2f} {share:>14.2f}", flush=True)
            shares += f" srpo_rollout_share_{label}={share:.2f}"
    verdict = "met" if ratio >= GOAL else "missed"
    envs = max(args.envs)
    load = f"cpus={os.cpu_count()} load_start={load_start:.1f} load_end={os.getloadavg()[0]:.1f}"
    print(
        f"RESULT embodied pool2_env_steps_per_s={rate:.0f} ratio={ratio:.2f} goal={GOAL} envs={envs}{shares} "
        f"{load} {verdict}"
    )


if __name__ == "__main__":
    main()
