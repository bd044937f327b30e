"""2-rank gloo scenarios of `data_parallel="ddp"`; each rank saves what it saw for the test to check."""

from __future__ import annotations

from pathlib import Path

import torch
from _training_helpers import engine_config, ppo_loss_fn, qwen_config, rollout_batch
from _training_workers import BUCKET_BYTES, FULL_BATCH, exported_weights, local_rows
from torch.distributed.tensor import DTensor

from rl_engines.training import (
    ForwardSpec,
    FSDPEngine,
    ModelConfig,
    OptimizerConfig,
    PrecisionConfig,
    ScheduleConfig,
    TrainConfigError,
)
from rl_engines.training._replicate import all_reduce_gradients

DDP = "ddp"


def ddp_config(*, init_seed: int = 3, data_parallel: str = DDP) -> object:
    """The tiny Qwen2 with clipping and a cosine schedule (so the optimizer and schedule states matter)."""
    return engine_config(
        model=ModelConfig(hf_config=qwen_config(), init_seed=init_seed),
        optimizer=OptimizerConfig(lr=1e-3, max_grad_norm=0.5),
        schedule=ScheduleConfig(kind="cosine", warmup_steps=1, total_steps=4),
        data_parallel=data_parallel,
    )


def _step(engine: FSDPEngine, seed: int) -> float:
    batch = local_rows(rollout_batch(FULL_BATCH, seed=seed), engine.rank)
    loss = engine.train_step(batch, ppo_loss_fn, ForwardSpec()).loss
    engine.step_lr_scheduler()
    return loss


def ddp_scenario(rank: int, out: Path) -> None:
    """Replicas from rank 0's weights, summed gradients, a NaN step skipped on both ranks, steps that keep the
    replicas equal, a checkpoint that an FSDP2 engine continues from, and the refused settings."""
    saved: dict[str, object] = {}
    # Each rank initialises differently; the engine must start every replica from rank 0's weights.
    engine = FSDPEngine.from_config(ddp_config(init_seed=3 + rank))
    saved["plain_parameters"] = not any(isinstance(p, DTensor) for p in engine.network.parameters())
    saved["initial"] = exported_weights(engine)
    full = rollout_batch(FULL_BATCH, seed=0)
    batch = local_rows(full, rank)
    saved["gradients"] = engine.compute_gradients(batch, ppo_loss_fn, ForwardSpec())
    saved["buckets"] = [[name for name, _ in bucket] for bucket in engine.export_weights(BUCKET_BYTES)]

    poisoned = {name: tensor.clone() for name, tensor in batch.items()}
    if rank == 1:
        poisoned["advantages"][0, -1] = float("nan")
        poisoned["response_mask"][0, -1] = 1
    saved["nan_step"] = engine.train_step(poisoned, ppo_loss_fn, ForwardSpec())
    saved["unchanged_after_nan"] = all(torch.equal(t, saved["initial"][n]) for n, t in exported_weights(engine).items())

    saved["losses"] = [_step(engine, seed) for seed in (1, 2)]
    saved["trained"] = exported_weights(engine)
    engine.save_checkpoint(out / "ddp_ckpt")
    saved["continued"] = [_step(engine, seed) for seed in (3, 4)]
    saved["continued_weights"] = exported_weights(engine)
    del engine

    sharded = FSDPEngine.from_config(ddp_config(data_parallel="fsdp"))
    saved["fsdp_loaded_step"] = sharded.load_checkpoint(out / "ddp_ckpt")
    saved["fsdp_continued"] = [_step(sharded, seed) for seed in (3, 4)]
    saved["fsdp_continued_weights"] = exported_weights(sharded)
    del sharded

    try:
        FSDPEngine.from_config(
            engine_config(qwen_config(), precision=PrecisionConfig(compute_dtype="bfloat16"), data_parallel=DDP)
        )
    except TrainConfigError as error:
        saved["mixed_precision_error"] = str(error)
    torch.save(saved, out / f"ddp_rank{rank}.pt")


class _Branches(torch.nn.Module):
    """Three parameters: `a` every rank uses, `b` only rank 1, `c` nobody."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Parameter(torch.ones(3))
        self.b = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
        self.c = torch.nn.Parameter(torch.ones(1))


def uneven_gradients_scenario(rank: int, out: Path) -> None:
    """Gradients on different parameters per rank, reduced in buckets of 8 bytes (one tensor each)."""
    module = _Branches()
    loss = (module.a * (rank + 1)).sum()
    if rank == 1:
        loss = loss + 10 * module.b.sum()
    loss.backward()
    all_reduce_gradients(list(module.parameters()), bucket_bytes=8)
    grads = {name: None if p.grad is None else p.grad.clone() for name, p in module.named_parameters()}
    torch.save(grads, out / f"uneven_rank{rank}.pt")
