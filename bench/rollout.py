"""Rollout throughput: HFEngine (and VLLMEngine) tokens/s against plain transformers `model.generate`, same batch.

Model: a tiny Qwen2 built in code (vocab 2048, hidden 256, 4 layers, 4 heads / 2 KV heads, fp32, CPU).
Batch: 16 prompts of 16-48 tokens (left-padded for `generate`), 64 new tokens each, greedy, EOS ignored
(`min_new_tokens` on the transformers side), so both produce exactly 16 x 64 tokens. HFEngine also
returns per-token log-probs and weight versions; `generate` returns ids only.

When vllm is importable (the `nox -s vllm` venv) a third column runs `rl_engines.vllm.VLLMEngine` on the same
model saved to a folder, same prompts and sampling (fp32, prefix cache off), in a process of its own (vLLM
rebinds the process's threads, which would change the other columns), against `generate` in that process, and
prints its tokens/s and that ratio; otherwise it prints that the column was skipped and why (`_rollout_vllm.py`).

Each repeat times one call of each column, the order reversed every other repeat (A, B, C, C, B, A, ...);
medians of `--repeats` (>= 5) after one warm-up each. Greedy outputs are compared with `generate`'s first.

With `--trainer`, two more rows run GRPO steps through the Trainer on the same model and a batch of the same
size (16 sampled responses x 64 tokens a step): `rollout.engine: hf`, and `rollout.engine: vllm` where vllm is
importable, each syncing the actor's weights into its engine after every update (`_rollout_trainer.py`); they
print the generate node's seconds and tokens/s per step, and the update-plus-sync seconds.

Heavy-tailed row (`_rollout_stream.py`, which states the workload): 64 greedy requests in GRPO groups of 4 with
grouped lognormal `max_new_tokens` (4-192), arriving as a stream, at most 16 in flight on both sides: HFEngine's
continuous batching (`submit`, the next request joining the running batch as one finishes) against batch-at-a-time
`generate` (consecutive batches of 16, each waiting for its longest response), same engine, alternating sides,
medians of `--repeats`; it prints both times, their ratio and whether the outputs are identical.

Last line: RESULT rollout tokens_per_s=<hf engine> ratio=<engine/plain> goal=0.95 met|missed
heavy_tail_ratio=<batch-at-a-time s / continuous s> goal=1.5 met|missed
Run: python bench/rollout.py [--repeats 7]   (~30 s on 2 cores)
     .nox/vllm/bin/python bench/rollout.py   (with the vLLM column; vLLM's CPU start-up adds about a minute)
     .nox/vllm/bin/python bench/rollout.py --trainer   (plus the Trainer rows: a few minutes more)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import _rollout_stream
import _rollout_vllm
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from rl_engines.rollout import GenerateRequest, HFEngine, HFEngineConfig, SamplingParams

BATCH, NEW_TOKENS, MIN_PROMPT, MAX_PROMPT = 16, 64, 16, 48
GOAL_RATIO = 0.95


def build() -> tuple[Qwen2ForCausalLM, list[list[int]]]:
    config = Qwen2Config(
        vocab_size=2048, hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.1, tie_word_embeddings=False,
        eos_token_id=None, pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).eval().requires_grad_(False)
    generator = torch.Generator().manual_seed(1)
    lengths = torch.randint(MIN_PROMPT, MAX_PROMPT + 1, (BATCH,), generator=generator).tolist()
    prompts = [torch.randint(1, config.vocab_size, (n,), generator=generator).tolist() for n in lengths]
    return model, prompts


def left_padded(prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, prompt in enumerate(prompts):
        ids[i, width - len(prompt) :] = torch.tensor(prompt)
        mask[i, width - len(prompt) :] = 1
    return ids, mask


def requests_of(prompts: list[list[int]]) -> list[GenerateRequest]:
    """The benchmark's greedy requests (NEW_TOKENS each, EOS ignored) for `prompts`."""
    params = SamplingParams(max_new_tokens=NEW_TOKENS, temperature=0.0, ignore_eos=True)
    return [GenerateRequest(f"r{i}", tuple(p), params) for i, p in enumerate(prompts)]


def plain_generate(model: Qwen2ForCausalLM, prompts: list[list[int]]) -> Callable[[], list[list[int]]]:
    """One call of transformers' `generate` on the left-padded prompts -> the new token ids of each."""
    ids, mask = left_padded(prompts)

    @torch.inference_mode()
    def run() -> list[list[int]]:
        out = model.generate(
            input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS, pad_token_id=0, eos_token_id=None,
        )  # fmt: skip
        return out[:, ids.shape[1] :].tolist()

    return run


def check_greedy(runs: dict[str, Callable[[], list[list[int]]]]) -> None:
    """Run each column once (its warm-up), check it made NEW_TOKENS per prompt, print how many match `generate`."""
    reference = runs["plain"]()
    for name, run in runs.items():
        if name == "plain":
            continue
        outputs = run()
        if any(len(o) != NEW_TOKENS for o in outputs):
            raise RuntimeError(f"{name} returned {[len(o) for o in outputs]} tokens, expected {NEW_TOKENS} each")
        same = sum(a == b for a, b in zip(outputs, reference, strict=True))
        print(f"{name}: greedy outputs identical to generate's for {same}/{BATCH} prompts (fp32 near-ties can flip)")


def alternate(runs: dict[str, Callable[[], list[list[int]]]], repeats: int) -> dict[str, list[float]]:
    """Seconds per call of each column over `repeats`, the order reversed every other repeat."""
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for repeat in range(repeats):
        for name in list(runs) if repeat % 2 == 0 else list(reversed(runs)):
            start = time.perf_counter()
            runs[name]()
            seconds[name].append(time.perf_counter() - start)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-vllm", action="store_true", help="skip the vLLM column even where vllm is installed")
    parser.add_argument("--trainer", action="store_true", help="add the rows through the Trainer (hf, vllm)")
    parser.add_argument("--trainer-steps", type=int, default=5, help="GRPO steps per Trainer row (the first untimed)")
    args = parser.parse_args()
    model, prompts = build()
    engine = HFEngine(model, HFEngineConfig())
    requests = requests_of(prompts)

    def run_engine() -> list[list[int]]:
        return [list(o.output_ids) for o in engine.generate(requests)]

    runs: dict[str, Callable[[], list[list[int]]]] = {"engine": run_engine, "plain": plain_generate(model, prompts)}
    print(f"torch threads: {torch.get_num_threads()}")
    check_greedy(runs)
    seconds = alternate(runs, args.repeats)
    skipped = _rollout_vllm.skip_reason(args.no_vllm)
    vllm_seconds = _rollout_vllm.measure(args.repeats) if skipped is None else None
    tokens = BATCH * NEW_TOKENS
    rates = {name: tokens / statistics.median(values) for name, values in seconds.items()}
    for name, rate in rates.items():
        median = statistics.median(seconds[name])
        versus = f", {rate / rates['plain']:.2f}x generate" if name != "plain" else ""
        print(f"{name:>7}: {rate:9.0f} tokens/s  (median of {args.repeats}: {median:.3f} s{versus})")
    if vllm_seconds is not None:
        vllm_rate, plain_rate = tokens / vllm_seconds["vllm"], tokens / vllm_seconds["plain"]
        print(
            f"   vllm: {vllm_rate:9.0f} tokens/s  (median of {args.repeats}: {vllm_seconds['vllm']:.3f} s, "
            f"{vllm_rate / plain_rate:.2f}x generate in its process: {plain_rate:.0f} tokens/s there)"
        )
    else:
        print(f"   vllm: skipped ({skipped})")
    if args.trainer:
        trainer_rows(model.config.to_diff_dict(), prompts, args.trainer_steps)
    tail_ratio = heavy_tail_row(engine, prompts, args.repeats)
    engine.shutdown()
    ratio = rates["engine"] / rates["plain"]
    verdict = "met" if ratio >= GOAL_RATIO else "missed"
    tail_verdict = "met" if tail_ratio >= _rollout_stream.GOAL_RATIO else "missed"
    print(
        f"RESULT rollout tokens_per_s={rates['engine']:.0f} ratio={ratio:.2f} goal={GOAL_RATIO} {verdict} "
        f"heavy_tail_ratio={tail_ratio:.2f} goal={_rollout_stream.GOAL_RATIO} {tail_verdict}"
    )


def heavy_tail_row(engine: HFEngine, prompts: list[list[int]], repeats: int) -> float:
    """Print the heavy-tailed row (`_rollout_stream.py`); its ratio batch-at-a-time / continuous seconds."""
    requests = _rollout_stream.workload(prompts)
    runs = {
        "continuous": _rollout_stream.continuous(engine, requests),
        "batch-at-a-time": _rollout_stream.batch_at_a_time(engine, requests),
    }
    first = {name: run() for name, run in runs.items()}  # warm-up
    same = sum(a == b for a, b in zip(first["continuous"], first["batch-at-a-time"], strict=True))
    tokens = sum(len(o) for o in first["continuous"])
    lengths = sorted(r.sampling.max_new_tokens for r in requests)
    print(
        f"heavy tail: {len(requests)} requests, {tokens} tokens, max_new_tokens median {lengths[len(lengths) // 2]} "
        f"max {lengths[-1]}, {_rollout_stream.CONCURRENCY} in flight; outputs identical for {same}/{len(requests)}"
    )
    seconds = alternate(runs, repeats)
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    for name, median in medians.items():
        print(f"heavy tail {name:>15}: {tokens / median:9.0f} tokens/s  (median of {repeats}: {median:.3f} s)")
    return medians["batch-at-a-time"] / medians["continuous"]


def trainer_rows(hf_config: dict, prompts: list[list[int]], steps: int) -> None:
    """Print the "through the Trainer" rows (`_rollout_trainer.py`)."""
    import _rollout_trainer

    rows = _rollout_trainer.measure(hf_config, prompts, steps)
    for engine, row in rows.items():
        print(
            f"trainer {engine:>4}: {row['tokens_per_s']:9.0f} tokens/s  (median of {steps - 1} steps: generate "
            f"{row['rollout']:.3f} s, update+sync {row['train+sync']:.3f} s, step {row['step']:.3f} s)"
        )
    if "vllm" in rows:
        print(f"vLLM through the Trainer: {rows['vllm']['tokens_per_s'] / rows['hf']['tokens_per_s']:.2f}x HFEngine's")
    else:
        print(f"trainer vllm: skipped ({_rollout_trainer.skip_reason()})")


if __name__ == "__main__":
    main()
