"""Tiny models, rollout-shaped batches, independent references and a 2-process gloo launcher for the tests.

The doubles the roles' tests in rl-runtime share (the tiny Qwen2, its engine config, rollout batches, the PPO
loss) live in `rl_engines.testing`; they are imported here under the names these tests use."""

from __future__ import annotations

import gc
import os
import socket
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast

from rl_core.losses import LossNormalizer, clipped_value_loss
from rl_engines.testing import TINY_PROMPT_LEN as PROMPT
from rl_engines.testing import TINY_RESPONSE_LEN as RESPONSE
from rl_engines.testing import TINY_VOCAB as VOCAB
from rl_engines.testing import ppo_loss_fn, with_ppo_fields
from rl_engines.testing import tiny_engine_config as engine_config
from rl_engines.testing import tiny_qwen_config as qwen_config
from rl_engines.testing import tiny_rollout_batch as rollout_batch
from rl_engines.training import ForwardOutput, LossOutput


def llama_config() -> LlamaConfig:
    """A 2-layer Llama with tied embeddings (the LM head is the embedding)."""
    return LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )


def reference_model(hf_config: Any = None, init_seed: int = 3) -> torch.nn.Module:
    """The same tiny model the engine builds, as a plain transformers model."""
    torch.manual_seed(init_seed)
    return AutoModelForCausalLM.from_config(hf_config or qwen_config(), attn_implementation="eager")


def reference_outputs(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs and entropy `(B, T)` on response tokens from one plain forward per sequence (with grad)."""
    log_probs = torch.zeros(batch["input_ids"].shape)
    entropy = torch.zeros(batch["input_ids"].shape)
    rows = []
    for row in range(batch["input_ids"].shape[0]):
        valid = batch["attention_mask"][row].bool()
        start = int(valid.nonzero()[0])
        tokens = batch["input_ids"][row][valid]
        logits = model(input_ids=tokens[None], use_cache=False).logits[0].float()
        log_softmax = torch.log_softmax(logits[:-1], dim=-1)
        token_lp = log_softmax.gather(-1, tokens[1:, None]).squeeze(-1)
        token_entropy = -(log_softmax.exp() * log_softmax).sum(-1)
        cols = torch.arange(start + 1, start + len(tokens))
        rows.append((row, cols, token_lp, token_entropy))
    index_rows = torch.cat([torch.full_like(c, r) for r, c, _, _ in rows])
    index_cols = torch.cat([c for _, c, _, _ in rows])
    mask = batch["response_mask"].bool()
    log_probs = log_probs.index_put((index_rows, index_cols), torch.cat([lp for *_, lp, _ in rows]))
    entropy = entropy.index_put((index_rows, index_cols), torch.cat([e for *_, e in rows]))
    return log_probs * mask, entropy * mask


def reference_gradients(batch: dict[str, torch.Tensor], hf_config: Any = None) -> dict[str, torch.Tensor]:
    """Gradients of the whole batch's PPO loss in one plain process, under the engine's parameter names."""
    model = reference_model(hf_config)
    log_probs, _ = reference_outputs(model, batch)
    outputs = ForwardOutput(log_probs, None, None)
    loss, _ = ppo_loss_fn(outputs, batch, LossNormalizer.from_mask(batch["response_mask"]))
    loss.backward()
    return {f"backbone.{name}": p.grad for name, p in model.named_parameters() if p.grad is not None}


def save_tokenizer(folder: Path, size: int) -> None:
    """A word-level tokenizer of exactly `size` tokens (Qwen2's loader adds <|endoftext|> unless it is there)."""
    vocab = {f"t{i}": i for i in range(size - 1)} | {"<|endoftext|>": size - 1}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="t0").save_pretrained(str(folder))


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _entry(rank: int, world: int, port: int, fn: Callable[..., None], args: tuple[Any, ...], out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # One intra-op thread per process: two ranks share the machine's cores.
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        fn(rank, Path(out), *args)
        # Tearing gloo down while the peer still has a collective in flight aborts the process (SIGABRT,
        # "terminate called without an active exception", seen once under CI load): meet first.
        gc.collect()
        dist.barrier()
    except BaseException:
        Path(out, f"error_rank{rank}.txt").write_text(traceback.format_exc())
        raise
    finally:
        dist.destroy_process_group()


def run_distributed(fn: Callable[..., None], out: Path, *args: Any, world: int = 2) -> None:
    """Run `fn(rank, out, *args)` in `world` gloo processes; re-raise the first rank's error."""
    try:
        mp.spawn(_entry, args=(world, free_port(), fn, args, str(out)), nprocs=world)
    except Exception as error:
        messages = [p.read_text() for p in sorted(out.glob("error_rank*.txt"))]
        raise AssertionError("\n".join(messages) or str(error)) from error


def value_loss_fn(
    outputs: ForwardOutput, micro_batch: dict[str, torch.Tensor], normalizer: LossNormalizer
) -> LossOutput:
    """rl_core's clipped value loss (clip range 0.5, token-mean) on a micro-batch: what the critic role computes."""
    loss, clipfrac = clipped_value_loss(
        outputs.values,
        micro_batch["values"],
        micro_batch["returns"],
        micro_batch["response_mask"],
        clip_range=0.5,
        aggregation="token-mean",
        normalizer=normalizer,
    )
    return LossOutput(loss, {"critic/vf_clipfrac": clipfrac})


__all__ = [
    "PROMPT",
    "RESPONSE",
    "VOCAB",
    "engine_config",
    "free_port",
    "llama_config",
    "ppo_loss_fn",
    "qwen_config",
    "reference_gradients",
    "reference_model",
    "reference_outputs",
    "rollout_batch",
    "run_distributed",
    "save_tokenizer",
    "value_loss_fn",
    "with_ppo_fields",
]
