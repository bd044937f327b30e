"""Model FLOPs utilisation with verl's formula, so our `perf/mfu/actor` compares with verl's runs.

verl (`verl/utils/flops_counter.py`, dense decoder models) counts, for one forward + backward pass:
`6 * N_dense * sum(tokens) + 12 * sum(seqlen^2) * head_dim * num_heads * num_layers`, where N_dense is
the parameters of every decoder layer's attention and MLP projections plus the embedding and LM head.
MFU is those FLOPs over the elapsed time and the devices' peak dense bf16 throughput.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rl_engines.training._errors import TrainConfigError

DENSE_FORWARD_BACKWARD = 6
"""2 FLOPs per parameter per token forward, 4 backward."""

ATTENTION_FORWARD_BACKWARD = 12
"""verl's factor for QK^T and attention-times-V, forward and backward, per (query, key) pair and head dim."""

SWIGLU_PROJECTIONS = 3
"""Gate, up and down projections of a SwiGLU MLP (Qwen2, Llama)."""

PEAK_BF16_FLOPS: dict[str, float] = {
    "H100": 989e12,
    "H800": 989e12,
    "H200": 989e12,
    "H20": 148e12,
    "A100": 312e12,
    "A800": 312e12,
    "L40S": 362e12,
    "B200": 2250e12,
}
"""Dense bf16 peak per device by name fragment, as verl's `get_device_flops` lists them."""


def estimate_train_flops(hf_config: Any, sequence_lengths: Sequence[int]) -> float:
    """FLOPs of one forward + backward pass over sequences of the given lengths, by verl's dense formula.

    Args:
        hf_config: a transformers config of a dense decoder (hidden_size, intermediate_size, vocab_size,
            num_hidden_layers, num_attention_heads, num_key_value_heads, optional head_dim).
        sequence_lengths: valid tokens of each sequence.
    """
    config = hf_config.get_text_config() if hasattr(hf_config, "get_text_config") else hf_config
    hidden, layers, heads = config.hidden_size, config.num_hidden_layers, config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    attention_params = hidden * (heads * head_dim + 2 * kv_heads * head_dim + heads * head_dim)
    mlp_params = hidden * config.intermediate_size * SWIGLU_PROJECTIONS
    embedding_and_head = config.vocab_size * hidden * 2
    dense_params = (attention_params + mlp_params) * layers + embedding_and_head
    tokens = sum(sequence_lengths)
    square_sum = sum(length * length for length in sequence_lengths)
    attention = ATTENTION_FORWARD_BACKWARD * square_sum * head_dim * heads * layers
    return float(DENSE_FORWARD_BACKWARD * dense_params * tokens + attention)


def peak_flops(device_name: str | None = None) -> float | None:
    """Dense bf16 peak FLOP/s of a device (the current CUDA device by default); None when unknown."""
    if device_name is None:
        if not torch.cuda.is_available():
            return None
        device_name = torch.cuda.get_device_name()
    matches = [name for name in PEAK_BF16_FLOPS if name in device_name]
    # The longest fragment wins, so "H200" is not read as "H20".
    return PEAK_BF16_FLOPS[max(matches, key=len)] if matches else None


def mfu(flops: float, seconds: float, peak_flops_per_device: float, num_devices: int = 1) -> float:
    """Achieved over peak: `flops / seconds / (peak_flops_per_device * num_devices)`."""
    if not (seconds > 0 and peak_flops_per_device > 0 and num_devices >= 1):
        raise TrainConfigError(
            f"mfu needs seconds > 0, peak_flops_per_device > 0 and num_devices >= 1, got {seconds}, "
            f"{peak_flops_per_device}, {num_devices}"
        )
    return flops / seconds / (peak_flops_per_device * num_devices)
