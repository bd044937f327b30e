"""The workload and the two sides of `train_engine.py`: rollout-shaped batches on a model shape built in code, a
plain transformers + AdamW loop, and the engine with the same loss.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch

SIZES: dict[str, dict[str, int]] = {
    # ~5M parameters: a step takes a fraction of a second on a 2-core CPU.
    # The embedded default's Llama shape (bench/grpo_vs_trl.py trains it).
    "embedded": dict(hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, vocab_size=106),
    "tiny": dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=4096),
    # Qwen2.5-0.5B's shape.
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, vocab_size=151936),
    # Qwen2.5-1.5B's shape.
    "1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2, vocab_size=151936),
}  # fmt: skip


def hf_config(args: argparse.Namespace) -> Any:
    """The Qwen2 config of `args.size` (untied head), long enough for `args.max_len`."""
    from transformers import Qwen2Config

    return Qwen2Config(**SIZES[args.size], max_position_embeddings=max(4096, args.max_len), tie_word_embeddings=False)


def rollout_batch(args: argparse.Namespace, rows: int, seed: int, vocab: int) -> dict[str, torch.Tensor]:
    """Rollout-shaped rows: prompt lengths up to a third of max_len, responses filling up to max_len."""
    gen = torch.Generator().manual_seed(seed)
    prompt_width = args.max_len // 3
    width = args.max_len
    attention = torch.zeros(rows, width, dtype=torch.int64)
    response = torch.zeros(rows, width, dtype=torch.int64)
    input_ids = torch.randint(1, vocab, (rows, width), generator=gen)
    for row in range(rows):
        if row % args.group_size == 0:
            prompt = int(torch.randint(prompt_width // 4, prompt_width + 1, (1,), generator=gen))
            leader = row
        else:  # a sibling of the group's first row: the same prompt tokens
            input_ids[row, :prompt_width] = input_ids[leader, :prompt_width]
        length = int(torch.randint((width - prompt_width) // 4, width - prompt_width + 1, (1,), generator=gen))
        attention[row, prompt_width - prompt : prompt_width + length] = 1
        response[row, prompt_width : prompt_width + length] = 1
    input_ids = input_ids * attention
    return {
        "input_ids": input_ids,
        "attention_mask": attention,
        "position_ids": (attention.cumsum(-1) - 1).clamp(min=0),
        "response_mask": response,
        "old_log_probs": (-torch.log(torch.tensor(float(vocab))) + 0.1 * torch.randn(rows, width, generator=gen))
        * response,
        "advantages": torch.randn(rows, width, generator=gen) * response,
    }


def plan_micro_batches(lengths: list[int], budget: int) -> list[list[int]]:
    """First-fit decreasing under the token budget (what rl_core.balancing's planner does, simplified)."""
    bins: list[tuple[int, list[int]]] = []
    for row in sorted(range(len(lengths)), key=lambda r: -lengths[r]):
        for index, (used, rows) in enumerate(bins):
            if used + lengths[row] <= budget:
                bins[index] = (used + lengths[row], [*rows, row])
                break
        else:
            bins.append((lengths[row], [row]))
    return [sorted(rows) for _, rows in bins]


def ppo_loss(log_probs: torch.Tensor, micro: dict[str, torch.Tensor], normalizer: Any) -> torch.Tensor:
    """rl_core's PPO loss of one micro-batch's `(b, T)` log-probs."""
    from rl_core.losses import PolicyLossInputs, ppo

    inputs = PolicyLossInputs(log_probs, micro["old_log_probs"], micro["advantages"], micro["response_mask"])
    return ppo(inputs, normalizer=normalizer).loss


class PlainLoop:
    """A straightforward transformers + AdamW training step over the given micro-batches."""

    def __init__(self, args: argparse.Namespace, device: torch.device) -> None:
        from transformers import AutoModelForCausalLM

        torch.manual_seed(args.seed)
        dtype = getattr(torch, args.dtype)
        self.model = AutoModelForCausalLM.from_config(hf_config(args), dtype=dtype, attn_implementation="sdpa")
        self.model.to(device).train()
        self.device = device
        fused = device.type == "cuda"
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=0.01, fused=fused or None)

    def step(self, batch: dict[str, torch.Tensor], plan: list[list[int]], normalizer: Any) -> None:
        for rows in plan:
            micro = {k: v[rows].to(self.device) for k, v in batch.items()}
            used = micro["attention_mask"].any(0).nonzero()
            cols = slice(int(used[0]), int(used[-1]) + 1)
            micro = {k: v[:, cols] for k, v in micro.items()}
            logits = self.model(
                input_ids=micro["input_ids"],
                attention_mask=micro["attention_mask"],
                position_ids=micro["position_ids"],
                use_cache=False,
            ).logits
            token_lp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, micro["input_ids"][:, 1:, None])
            log_probs = torch.cat([torch.zeros_like(token_lp[:, :1, 0]), token_lp[..., 0]], dim=1)
            ppo_loss(log_probs, micro, normalizer).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def build_engine(args: argparse.Namespace, *, share_prefixes: bool = True) -> Any:
    """The engine on `args`' model shape, device, dtype and micro-batch budget."""
    from rl_engines.training import (
        FSDPEngine,
        MicroBatchConfig,
        ModelConfig,
        OptimizerConfig,
        PrecisionConfig,
        TrainEngineConfig,
    )

    config = TrainEngineConfig(
        model=ModelConfig(hf_config=hf_config(args), init_seed=args.seed),
        precision=PrecisionConfig(param_dtype=args.dtype),
        optimizer=OptimizerConfig(lr=args.lr, weight_decay=0.01, max_grad_norm=1.0),
        # Grouped rows run padded, so that shared prompts can run once; distinct rows run packed.
        micro_batch=MicroBatchConfig(
            max_tokens_per_micro_batch=args.budget,
            packing=_packing(args),
            share_prefixes=share_prefixes,
        ),
        device=args.device,
    )
    return FSDPEngine.from_config(config)


def engine_loss(outputs: Any, micro: dict[str, torch.Tensor], normalizer: Any) -> Any:
    """`ppo_loss` as the engine's loss function."""
    from rl_engines.training import LossOutput

    return LossOutput(ppo_loss(outputs.log_probs, micro, normalizer), {})


def engine_step(engine: Any, batch: dict[str, torch.Tensor]) -> None:
    """One engine training step (the engine plans its micro-batches and normalizer); a skipped step is an error."""
    from rl_engines.training import ForwardSpec

    result = engine.train_step(batch, engine_loss, ForwardSpec())
    if result.skipped:
        raise RuntimeError(f"engine skipped a benchmark step: {result}")


def workload(args: argparse.Namespace, vocab: int) -> tuple[dict[str, torch.Tensor], list[list[int]], Any]:
    """The batch, its micro-batch plan and its loss normalizer."""
    from rl_core.losses import LossNormalizer

    batch = rollout_batch(args, args.batch, seed=args.seed, vocab=vocab)
    lengths = batch["attention_mask"].sum(-1).tolist()
    return batch, plan_micro_batches(lengths, args.budget), LossNormalizer.from_mask(batch["response_mask"])


def _packing(args: argparse.Namespace) -> bool | str:
    """`--packing`: "auto" (the engine's default: packed only under a varlen kernel), true or false; unset, packed
    when every prompt is distinct (`--group-size 1`), the CPU figures' setting."""
    if args.packing is None:
        return args.group_size == 1
    return "auto" if args.packing == "auto" else args.packing == "true"
