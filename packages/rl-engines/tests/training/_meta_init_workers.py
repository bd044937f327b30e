"""Scenarios of 2 gloo ranks building the engine from rank 0's weights (meta-device init) or on every rank."""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch
from _training_helpers import engine_config, llama_config, ppo_loss_fn, qwen_config, rollout_batch, value_loss_fn
from _training_workers import FULL_BATCH, local_rows
from transformers import Qwen2Config

from rl_engines.training import ForwardSpec, FSDPEngine, ModelConfig
from rl_engines.training._fsdp import full_tensor
from rl_engines.training._meta_init import non_persistent_buffers

KIB = 1024
T = TypeVar("T")


def memory_model_config() -> Qwen2Config:
    """A ~26M-parameter Qwen2 (98 MiB in float32) of many small tensors: the full model dwarfs any one tensor,
    so holding it shows in a process's peak memory."""
    return Qwen2Config(
        hidden_size=256,
        intermediate_size=1024,
        num_hidden_layers=24,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=4096,
        max_position_embeddings=64,
    )


def _proc_status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise KeyError(field)


def peak_rss_growth_bytes(build: Callable[[], T]) -> tuple[T, int]:
    """Run `build()`; return its result and how far this process's peak resident memory rose above the
    resident memory before it (Linux: the peak is reset through /proc/self/clear_refs)."""
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # "5" resets VmHWM (the peak) to the current VmRSS
    before = _proc_status_kib("VmRSS")
    result = build()
    return result, (_proc_status_kib("VmHWM") - before) * KIB


def memory_scenario(rank: int, out: Path, broadcast: bool) -> None:
    """Peak memory growth of building a frozen engine, with or without rank 0's broadcast, first thing in a
    fresh process."""
    config = engine_config(
        model=ModelConfig(hf_config=memory_model_config(), broadcast_from_rank0=broadcast), optimizer=None
    )
    engine, growth = peak_rss_growth_bytes(lambda: FSDPEngine.from_config(config))
    local = sum(p.to_local().numel() * p.element_size() for p in engine.network.parameters())
    full = sum(p.numel() * p.element_size() for p in engine.network.parameters())
    torch.save({"growth": growth, "shard_bytes": local, "model_bytes": full}, out / f"memory_{broadcast}_{rank}.pt")


def _critic_batch(rank: int) -> dict[str, torch.Tensor]:
    batch = local_rows(rollout_batch(FULL_BATCH, seed=0), rank)
    gen = torch.Generator().manual_seed(rank)
    batch["values"] = torch.randn(batch["input_ids"].shape, generator=gen) * batch["response_mask"]
    batch["returns"] = torch.randn(batch["input_ids"].shape, generator=gen) * batch["response_mask"]
    return batch


def _run_case(rank: int, model: ModelConfig) -> dict[str, object]:
    """Build, forward, one train step: what a rank saw (every tensor full)."""
    rng_before = torch.get_rng_state()
    engine = FSDPEngine.from_config(engine_config(model=model))
    seen: dict[str, object] = {"rng_untouched": torch.equal(rng_before, torch.get_rng_state())}
    backbone = engine.network.backbone
    seen["tied"] = backbone.get_input_embeddings().weight is backbone.get_output_embeddings().weight
    seen["optimized"] = sum(len(group["params"]) for group in engine.optimizer.param_groups)
    seen["buffers"] = {name: buffer.clone() for name, buffer in non_persistent_buffers(engine.network)}
    batch = _critic_batch(rank)
    if model.value_head:
        spec, loss_fn = ForwardSpec(log_probs=False, values=True), value_loss_fn
    else:
        spec, loss_fn = ForwardSpec(entropy=True), ppo_loss_fn
    seen["outputs"] = engine.forward(batch, spec)
    seen["step"] = engine.train_step(batch, loss_fn, spec)
    seen["weights"] = {name: full_tensor(p.detach()).clone() for name, p in engine.network.named_parameters()}
    return seen


CASES = {
    "qwen": ModelConfig(hf_config=qwen_config(), init_seed=3),
    "llama_tied": ModelConfig(hf_config=llama_config(), init_seed=3),
    "critic": ModelConfig(hf_config=qwen_config(), init_seed=3, value_head=True),
}


def equivalence_scenario(rank: int, out: Path, folder: str, corrupt_folder: str) -> None:
    """The rank-0 broadcast against every rank building the model, per case (and a model folder); then a
    folder whose weights only rank 0 reads, and cannot."""
    saved: dict[object, object] = {}
    cases = CASES | {"folder": ModelConfig(path=folder)}
    for name, model in cases.items():
        for broadcast in (True, False):
            saved[name, broadcast] = _run_case(rank, dataclasses.replace(model, broadcast_from_rank0=broadcast))
    try:
        FSDPEngine.from_config(engine_config(model=ModelConfig(path=corrupt_folder, broadcast_from_rank0=True)))
    except Exception as error:  # rank 0 raises the loader's own error, the others the broadcast one
        saved["corrupt_error"] = (type(error).__name__, str(error))
    torch.save(saved, out / f"equivalence_rank{rank}.pt")
