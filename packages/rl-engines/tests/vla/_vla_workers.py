"""Scenarios run by each rank of a 2-process gloo group on the tiny VLA; they save what they saw."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from _vla_helpers import small_config, trajectory_batch, vla_engine_config, with_ppo_fields
from test_vla_engine import ppo_loss_fn

from rl_engines.training import ForwardSpec, FSDPEngine

FULL_BATCH = 8
LOCAL_BATCH = FULL_BATCH // 2


def full_batch() -> dict[str, torch.Tensor]:
    """The batch both ranks split (built from the small config, seed 0)."""
    return with_ppo_fields(trajectory_batch(small_config(), batch=FULL_BATCH, steps=3))


def vla_scenario(rank: int, out: Path, data_parallel: str) -> None:
    """Forward, gradients over 2 ranks x several micro-batches, one step and an export, under `data_parallel`."""
    full = full_batch()
    batch = {k: v[rank * LOCAL_BATCH : (rank + 1) * LOCAL_BATCH] for k, v in full.items()}
    engine = FSDPEngine.from_config(vla_engine_config(max_tokens=150, data_parallel=data_parallel))
    saved: dict[str, object] = {
        "log_probs": engine.forward(batch, ForwardSpec(entropy=True)).log_probs,
        "micro_batches": len(engine._plan(batch, ForwardSpec())),
        "gradients": engine.compute_gradients(batch, ppo_loss_fn, ForwardSpec()),
        "step": engine.train_step(batch, ppo_loss_fn, ForwardSpec()),
    }
    if data_parallel == "fsdp":
        # Only rank 0 builds the full model; the others receive their shards from it.
        model = vla_engine_config().model
        from_rank0 = vla_engine_config(
            max_tokens=150, model=dataclasses.replace(model, broadcast_from_rank0=True), data_parallel=data_parallel
        )
        saved["rank0_log_probs"] = FSDPEngine.from_config(from_rank0).forward(batch, ForwardSpec()).log_probs
    engine.export_hf(out / f"export_{data_parallel}")
    saved["trained_log_probs"] = engine.forward(batch, ForwardSpec()).log_probs
    torch.save(saved, out / f"vla_{data_parallel}_rank{rank}.pt")
