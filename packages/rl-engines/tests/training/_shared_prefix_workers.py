"""Batches of rows that share prompts, and the 2-rank FSDP2 scenario of the shared-prefix layout."""

from __future__ import annotations

from pathlib import Path

import torch
from _training_helpers import PROMPT, RESPONSE, VOCAB, engine_config, ppo_loss_fn, qwen_config, with_ppo_fields

from rl_engines.training import ForwardSpec, FSDPEngine, MicroBatchConfig


def grouped_batch(groups: int, samples: int, seed: int) -> dict[str, torch.Tensor]:
    """`groups` prompts of different lengths with `samples` responses each, then one row with a prompt of its own;
    rows laid out as a rollout makes them (left-padded prompt, response, right padding), plus PPO tensors."""
    gen = torch.Generator().manual_seed(seed)
    rows, width = groups * samples + 1, PROMPT + RESPONSE
    input_ids = torch.zeros(rows, width, dtype=torch.int64)
    attention_mask = torch.zeros_like(input_ids)
    response_mask = torch.zeros_like(input_ids)
    prompts = [torch.randint(1, VOCAB, (PROMPT - g,), generator=gen) for g in range(groups + 1)]
    for row in range(rows):
        prompt = prompts[min(row // samples, groups)]
        length = int(torch.randint(1, RESPONSE + 1, (1,), generator=gen))
        input_ids[row, PROMPT - len(prompt) : PROMPT] = prompt
        input_ids[row, PROMPT : PROMPT + length] = torch.randint(1, VOCAB, (length,), generator=gen)
        attention_mask[row, PROMPT - len(prompt) : PROMPT + length] = 1
        response_mask[row, PROMPT : PROMPT + length] = 1
    return with_ppo_fields(input_ids, attention_mask, response_mask, gen)


def shared_prefix_scenario(rank: int, out: Path) -> None:
    """dp = 2 under FSDP2: each rank takes half the groups (the lone row goes to rank 1) and saves its gradients."""
    full = grouped_batch(3, 4, seed=4)
    rows = list(range(0, 6)) if rank == 0 else list(range(6, 13))
    batch = {name: tensor[rows] for name, tensor in full.items()}
    micro_batch = MicroBatchConfig(max_tokens_per_micro_batch=1024, packing=False)
    engine = FSDPEngine.from_config(engine_config(qwen_config(), micro_batch=micro_batch))
    gradients = engine.compute_gradients(batch, ppo_loss_fn, ForwardSpec())
    saved = {"layout": engine.input_layout.value, "fast": engine.network.fast_forward is not None}
    torch.save(saved | {"gradients": gradients}, out / f"shared_rank{rank}.pt")
