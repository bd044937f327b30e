"""GRPO samples/s and generated tokens/s of our `grpo` recipe against TRL's GRPOTrainer, on the same model and data.

Both sides train the embedded default after its SFT warm start (`rl-recipes sft`: the ~130K-parameter Llama, its
character tokenizer and the generated arithmetic rows, so rewards are not all zero), fp32 on the CPU, with the same
prompts (rl_recipes' prompt text and token ids; TRL's tokenization is checked against them), reward
(rl_recipes' `gsm8k_exact_match` against the `#### N` ground truth), group size (8 prompts x 8 completions per
step), completion length, temperature 1.0, learning rate (`--lr`, default 1e-6 so that the policy, and with it the
completion lengths, stays put; constant, AdamW, no weight decay, grad clip 1.0), one
optimizer step per generation batch, and no reference model or KL (beta=0):
  trl   TRL 1.16 `GRPOTrainer` in its own venv (`--venv`, created with torch pinned to 2.13.0 CPU):
        use_cpu=True, bf16=False, per_device_train_batch_size=64, num_generations=8, steps_per_generation=1,
        beta=0, gradient_checkpointing=False (ours does not recompute activations either). `--trl-threads 0 1`
        runs it twice, with torch's default intra-op threads (one per core) and with one thread: on a loaded
        2-core machine two OpenMP threads can be several times slower than one. `--trl-malloc default retain`
        runs each thread setting with glibc's allocator defaults and with freed host memory retained, as our
        workers run (`placement.retain_host_memory`, ~10 % of a small CPU step), so that setting is no edge of
        ours. The fastest TRL setting of the run is the baseline of the ratio.
  ours  the packaged `grpo` recipe (warm_start=null, data on the SFT rows, no validation or checkpoints) driven
        through `Trainer(...).session()` in calls of the recipe's `trainer.steps_per_call` steps, as `rl-recipes
        train` drives it, on the full multi-controller runtime: Ray, one DAG worker per slot, an actor engine (ddp
        replicas, as the recipe sets) and an HF rollout engine per worker. `--slots 2 1` measures 2 slots (the
        embedded default as users run it) and 1 slot. The recipe sets `algorithm.skip_inert_rows`: the rows of a
        group that scored alike (advantage 0, no loss or gradient) run no forward in the update; TRL runs their
        forward and backward. The share of such rows is printed per shape.

Each side is a subprocess that stays alive for the whole run and runs windows of `--steps` training steps when
told (TRL blocks in a TrainerCallback between windows), so the sides alternate trl, ours, ours, trl, ... in one
run: one warm-up window each, then `--windows` measured rounds. A window is 20 steps by default: 5-step windows
(~0.2 s of ours, each starting right after the other side's) gave our side medians of 1,720-1,870 samples/s over
three runs where one run of 20-step windows gave 1,950 with all five windows within 2 %, closer to what a training
run's back-to-back steps see. A window's samples/s is the completions generated in it over its wall time, and its
tokens/s the completion tokens generated (through the eos token, on both sides; counted by TRL's reward function,
and from our step metrics); the figures are medians over the windows.

`--shape NAME` picks the model and response length (`_trl_shapes`): `default` (the embedded default above, unchanged)
or a shape of another model family, size and answer format, warm-started by `rl-recipes sft` on its own rows;
`--shape all` runs every shape in turn (each with its own workers) and reports each.

Last line: RESULT grpo_vs_trl samples_per_s=<ours, first --slots> ratio=<ours / fastest trl> goal=2.0 met|missed,
for the shape with the lowest ratio when several run (its name in `shape=`).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
from pathlib import Path
from typing import Any

from _trl_protocol import WorkerProcess
from _trl_setup import TRAIN_FILE, ensure_trl_venv, write_prompt_rows
from _trl_shapes import ALL_SHAPES, DEFAULT_SHAPE, SHAPES, Shape, ensure_shape_sft, shape_names

GOAL_RATIO = 2.0
BENCH = Path(__file__).resolve().parent
PROMPTS_FILE = "trl_prompts.jsonl"
STARTUP_TIMEOUT_S = 900.0
"""Loading TRL, or starting Ray and its workers, on a busy 2-core machine."""
WINDOW_TIMEOUT_S = 900.0
TRL = "trl"
EVERY_ROW = "-every-row"
"""Suffix of `--every-row-too`'s variants of ours."""
MALLOC_DEFAULT = "default"
MALLOC_RETAIN = "retain"
STEPS_PER_WINDOW = 20
STATIONARY_LR = 1e-6
"""Small enough that the policy stays at the SFT start for the whole run (every step still runs the full backward
and AdamW update): at the embedded default's 1e-3 each side's policy drifts its own way within a few steps (one
run's completions shrank from 14 to 7 tokens), so the sides would no longer generate the same work."""


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps",
        type=int,
        default=STEPS_PER_WINDOW,
        help="training steps per window (ours runs them in calls of the recipe's trainer.steps_per_call)",
    )
    parser.add_argument("--windows", type=int, default=5, help="measured windows per side (after one warm-up)")
    parser.add_argument("--prompts", type=int, default=8, help="prompts per step")
    parser.add_argument("--samples", type=int, default=8, help="completions per prompt")
    parser.add_argument(
        "--shape",
        choices=[*SHAPES, ALL_SHAPES],
        default=DEFAULT_SHAPE,
        help="model and response length: "
        + "; ".join(f"{name}: {shape.description}" for name, shape in SHAPES.items())
        + f"; {ALL_SHAPES}: each in turn",
    )
    parser.add_argument(
        "--max-new-tokens", type=int, default=None, help="completion length (default: the shape's; 24 for default)"
    )
    parser.add_argument("--lr", type=float, default=STATIONARY_LR, help="learning rate (both sides)")
    parser.add_argument("--slots", type=int, nargs="+", default=[2, 1], help="our placement.slots settings to run")
    parser.add_argument(
        "--trl-threads",
        type=int,
        nargs="+",
        default=[0, 1],
        help="TRL's torch threads settings to run (0: torch's default, one per core); the fastest is the baseline",
    )
    parser.add_argument(
        "--trl-malloc",
        nargs="+",
        choices=[MALLOC_DEFAULT, MALLOC_RETAIN],
        default=[MALLOC_DEFAULT, MALLOC_RETAIN],
        help="TRL's host-memory settings to run: glibc's defaults, or retained as our workers keep it "
        "(placement.retain_host_memory); each with every --trl-threads setting",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--every-row-too",
        action="store_true",
        help="also run ours at each --slots with algorithm.skip_inert_rows=false (every row's forward, as before the "
        "recipe set it), alternating with the others: the skip's effect in the same run, not the goal's figure",
    )
    parser.add_argument(
        "--phases-dir",
        type=Path,
        default=None,
        help="time our update_actor's phases into DIR/<shape>/ours-<slots>slot (`_update_actor_phases`; "
        "UPDATE_ACTOR_CPROFILE=1 adds cProfile): a profiling run, not a measurement",
    )
    parser.add_argument("--trl-version", default="1.16.*")
    parser.add_argument("--venv", type=Path, default=BENCH / ".venvs" / "trl", help="TRL's venv (made if missing)")
    parser.add_argument(
        "--work-dir", type=Path, default=BENCH / "results" / "grpo_vs_trl", help="SFT model, prompts, worker logs"
    )
    args = parser.parse_args()
    if args.windows < 1 or args.steps < 1:
        parser.error("--windows and --steps must be >= 1")
    return args


def _shared(args: argparse.Namespace, shape: Shape) -> list[str]:
    return [
        f"--prompts={args.prompts}",
        f"--samples={args.samples}",
        f"--max-new-tokens={args.max_new_tokens or shape.max_new_tokens}",
        f"--lr={args.lr}",
        f"--max-steps={(args.windows + 1) * args.steps}",
        f"--seed={args.seed}",
    ]


def _trl_settings(args: argparse.Namespace) -> list[tuple[int, str]]:
    return [(threads, malloc) for malloc in args.trl_malloc for threads in args.trl_threads]


def _trl_name(threads: int, malloc: str) -> str:
    name = TRL if threads == 0 else f"{TRL}-{threads}thread"
    return name if malloc == MALLOC_DEFAULT else f"{name}-{malloc}"


def _start_workers(
    args: argparse.Namespace, shape: Shape, trl_python: Path, model: Path, train_file: Path, run_dir: Path
) -> dict[str, Any]:
    prompts_file = run_dir / PROMPTS_FILE
    rows = write_prompt_rows(model, train_file, prompts_file)
    print(f"prompts: {rows} training rows from {train_file}")
    workers = {}
    for threads, malloc in _trl_settings(args):
        name = _trl_name(threads, malloc)
        command = [str(trl_python), str(BENCH / "_trl_worker.py"), f"--model={model}", f"--prompts-file={prompts_file}"]
        command += [f"--threads={threads}", *(["--retain-host-memory"] if malloc == MALLOC_RETAIN else [])]
        workers[name] = WorkerProcess(name, [*command, *_shared(args, shape)], run_dir / f"{name}.log")
    variants: list[tuple[str, list[str]]] = [("", [])]
    if args.every_row_too:
        variants.append((EVERY_ROW, ["--override=algorithm.skip_inert_rows=false"]))
    for slots in args.slots:
        for suffix, extra in variants:
            name = f"ours-{slots}slot{suffix}"
            command = [
                sys.executable,
                str(BENCH / "_trl_ours_worker.py"),
                f"--model={model}",
                f"--train-file={train_file}",
                f"--output-dir={run_dir / name}",
                f"--slots={slots}",
                *extra,
            ]
            if args.phases_dir is not None:
                command.append(f"--phases-dir={args.phases_dir.resolve() / shape.name / name}")
            workers[name] = WorkerProcess(name, [*command, *_shared(args, shape)], run_dir / f"{name}.log")
    return workers


def _rates(report: dict[str, Any]) -> tuple[float, float]:
    return report["completions"] / report["seconds"], report["tokens"] / report["seconds"]


def _print_side(name: str, ready: dict[str, Any], reports: list[dict[str, Any]], expected: int) -> dict[str, float]:
    samples = [_rates(report)[0] for report in reports]
    tokens = [_rates(report)[1] for report in reports]
    step_seconds = [s for report in reports for s in report["step_seconds"]]
    reward = statistics.fmean(report["reward_mean"] for report in reports)
    completions = sum(report["completions"] for report in reports)
    generated = sum(report["tokens"] for report in reports)
    steps = sum(report["steps"] for report in reports)
    summary = {
        "samples_per_s": statistics.median(samples),
        "tokens_per_s": statistics.median(tokens),
        "step_s": statistics.median(step_seconds),
    }
    same = "" if completions == expected * steps else f"  (EXPECTED {expected} PER STEP)"
    print(
        f"  {name:<12} {summary['samples_per_s']:8.1f} samples/s  {summary['tokens_per_s']:9.1f} tokens/s  "
        f"{summary['step_s']:.3f} s/step median  ({completions / steps:.0f} completions/step{same}, "
        f"{generated / completions:.1f} tokens/completion, reward {reward:.3f})"
    )
    print(f"  {'':<12} windows samples/s: {', '.join(f'{rate:.0f}' for rate in samples)};  {ready}")
    if "timing" in reports[0]:
        keys = reports[0]["timing"]
        medians = {key: statistics.median(report["timing"].get(key, 0.0) for report in reports) for key in keys}
        parts = ", ".join(f"{key.removeprefix('timing_s/')} {value:.3f}" for key, value in medians.items())
        print(f"  {'':<12} seconds per step (median of window means): {parts}")
    if "inert_row_fraction" in reports[0]:
        inert = statistics.fmean(report["inert_row_fraction"] for report in reports)
        print(f"  {'':<12} rows with advantage 0 (no forward under algorithm.skip_inert_rows): {inert:.2f}")
    return summary


def _measure(args: argparse.Namespace, shape: Shape, trl_python: Path) -> tuple[float, float]:
    """Run `shape`'s sides in alternating windows and print their figures; returns (ours samples/s, ratio)."""
    model = ensure_shape_sft(shape, args.work_dir, args.seed)
    train_file = model.parent / "data" / TRAIN_FILE
    run_dir = args.work_dir if shape.name == DEFAULT_SHAPE else args.work_dir / shape.name
    run_dir.mkdir(parents=True, exist_ok=True)
    print(f"\n=== shape {shape.name}: {shape.description}")
    workers = _start_workers(args, shape, trl_python, model, train_file, run_dir)
    try:
        ready = {name: worker.ready(STARTUP_TIMEOUT_S) for name, worker in workers.items()}
        for name, worker in workers.items():
            warm = worker.run(args.steps, WINDOW_TIMEOUT_S)
            print(f"warm-up {name}: {warm['steps']} steps in {warm['seconds']:.2f} s")
        reports: dict[str, list[dict[str, Any]]] = {name: [] for name in workers}
        for window in range(args.windows):
            for name, worker in workers.items():
                reports[name].append(worker.run(args.steps, WINDOW_TIMEOUT_S))
            line = ", ".join(f"{name} {_rates(reports[name][-1])[0]:.0f}" for name in workers)
            print(f"window {window + 1}/{args.windows} samples/s: {line}")
    finally:
        for worker in workers.values():
            worker.close()
    expected = args.prompts * args.samples
    print(
        f"\nshape {shape.name}: {args.prompts} prompts x {args.samples} completions per step, "
        f"<= {args.max_new_tokens or shape.max_new_tokens} new tokens, lr {args.lr}, fp32 CPU; "
        f"{args.windows} windows of {args.steps} steps each, alternating; medians"
    )
    summaries = {name: _print_side(name, ready[name], reports[name], expected) for name in workers}
    trl_names = [_trl_name(threads, malloc) for threads, malloc in _trl_settings(args)]
    baseline = max(trl_names, key=lambda name: summaries[name]["samples_per_s"])
    for name in workers:
        if name not in trl_names:
            for trl in trl_names:
                ours, theirs = summaries[name], summaries[trl]
                print(
                    f"  {name}/{trl}: samples/s {ours['samples_per_s'] / theirs['samples_per_s']:.3f}, "
                    f"tokens/s {ours['tokens_per_s'] / theirs['tokens_per_s']:.3f}"
                )
    primary = summaries[f"ours-{args.slots[0]}slot"]["samples_per_s"]
    ratio = primary / summaries[baseline]["samples_per_s"]
    print(
        f"shape {shape.name}: ratio {ratio:.3f} against the fastest TRL setting ({baseline}), ours at "
        f"placement.slots={args.slots[0]}"
    )
    return primary, ratio


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = _parse()
    args.work_dir = args.work_dir.resolve()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    trl_python = ensure_trl_venv(args.venv.resolve(), args.trl_version)
    results = {name: _measure(args, SHAPES[name], trl_python) for name in shape_names(args.shape)}
    if len(results) > 1:
        print("\nper shape (ours samples/s, ratio against the fastest TRL setting):")
        for name, (samples, ratio) in results.items():
            print(f"  {name:<14} {samples:8.1f}  {ratio:.3f}  {'met' if ratio >= GOAL_RATIO else 'missed'}")
    worst = min(results, key=lambda name: results[name][1])
    primary, ratio = results[worst]
    verdict = "met" if ratio >= GOAL_RATIO else "missed"
    shape = f" shape={worst}" if len(results) > 1 else ""
    print(f"RESULT grpo_vs_trl samples_per_s={primary:.1f} ratio={ratio:.3f} goal={GOAL_RATIO}{shape} {verdict}")


if __name__ == "__main__":
    main()
