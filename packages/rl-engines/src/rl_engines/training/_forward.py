"""The network the engine shards (a causal LM plus an optional value head) and its per-token forward.

Log-probabilities and entropy come from rl_core's chunked function applied to the final hidden states
and the LM-head weight, so the `(N, V)` logits are never held; only the hidden states of target tokens
reach the heads. The outputs are scattered back to `(B, T)` inside the root's forward, so FSDP2 sees
fresh (non-view) output tensors to hang its pre-backward hooks on.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from rl_core.logprobs import log_probs_and_entropy_from_hidden
from rl_engines.training._errors import TrainConfigError
from rl_engines.training._fast_forward import FastForward
from rl_engines.training._packing import InputLayout, lay_out
from rl_engines.training._shared_prefix import PrefixInputs, shared_prefix_hidden
from rl_engines.training._types import Batch, ForwardOutput, ForwardSpec
from rl_engines.training._vla import VLANetwork, vla_forward_micro_batch

VALUE_HEAD_SEED_OFFSET = 1
"""The value head is initialised under `init_seed + 1`, so it does not repeat the backbone's first draws."""

DEFAULT_INITIALIZER_RANGE = 0.02


class PolicyNetwork(torch.nn.Module):
    """A Hugging Face causal LM (`backbone`) with an optional `(H, 1)` value head; the FSDP2 root module.

    With `fast_forward` set, the backbone's hidden states come from it rather than from transformers' forward (the
    engine sets it where the model and its layout allow)."""

    def __init__(self, backbone: PreTrainedModel, *, value_head: bool, init_seed: int = 0) -> None:
        super().__init__()
        self.backbone = backbone
        self.fast_forward: FastForward | None = None
        self.value_head: torch.nn.Linear | None = None
        if value_head:
            hidden = backbone.config.get_text_config().hidden_size
            std = getattr(backbone.config, "initializer_range", DEFAULT_INITIALIZER_RANGE)
            weight = next(backbone.parameters())
            # Linear's own initialisation draws random numbers too: keep all of it off the caller's stream.
            with torch.random.fork_rng(devices=[]):
                self.value_head = torch.nn.Linear(hidden, 1, dtype=weight.dtype)
                torch.manual_seed(init_seed + VALUE_HEAD_SEED_OFFSET)
                torch.nn.init.normal_(self.value_head.weight, std=std)
            torch.nn.init.zeros_(self.value_head.bias)
            head = backbone.get_output_embeddings()
            if head is not None and head.weight is not backbone.get_input_embeddings().weight:
                # A critic regresses values; the untied LM head takes no part in its loss.
                head.weight.requires_grad_(False)

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        source: torch.Tensor,
        labels: torch.Tensor,
        rows: torch.Tensor,
        cols: torch.Tensor,
        shape: tuple[int, int],
        prefix: PrefixInputs | None,
        spec: ForwardSpec,
        chunk_size: int,
    ) -> ForwardOutput:
        """Per-token outputs of one laid-out micro-batch, each `(B, T)` float32 (see `ForwardOutput`).

        The `ModelInputs` tensors come flat, not as a tuple, so FSDP2's forward hooks see every one of them.
        """
        hidden = self._hidden(input_ids, position_ids, attention_mask, prefix)[source]
        log_probs = entropy = values = None
        if spec.log_probs or spec.entropy:
            head = self.backbone.get_output_embeddings()
            if head is None:
                raise TrainConfigError("log-probs and entropy need the model's output embeddings (its LM head)")
            bias = head.bias if isinstance(head, torch.nn.Linear) else None
            token_log_probs, token_entropy = log_probs_and_entropy_from_hidden(
                hidden, head.weight, labels, bias=bias, temperature=spec.temperature, chunk_size=chunk_size
            )
            log_probs = _scatter(token_log_probs, rows, cols, shape) if spec.log_probs else None
            entropy = _scatter(token_entropy, rows, cols, shape) if spec.entropy else None
        if spec.values:
            if self.value_head is None:
                raise TrainConfigError("ForwardSpec(values=True) needs a value head: set ModelConfig.value_head=True")
            values = _scatter(self.value_head(hidden).squeeze(-1), rows, cols, shape)
        return ForwardOutput(log_probs, entropy, values)

    def _hidden(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        prefix: PrefixInputs | None,
    ) -> torch.Tensor:
        """The backbone's `(N, H)` final hidden states of one laid-out micro-batch (`ModelInputs`)."""
        fast, base = self.fast_forward, self.backbone.base_model
        if prefix is not None:
            if attention_mask is None:
                raise ValueError("a shared-prefix micro-batch needs the continuations' attention_mask")
            if fast is not None:
                return fast.shared_prefix_hidden(prefix, input_ids, position_ids, attention_mask)
            return shared_prefix_hidden(base, prefix, input_ids, position_ids, attention_mask)
        if fast is not None and attention_mask is not None:
            return fast.hidden(input_ids, position_ids, attention_mask)
        hidden = base(
            input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask, use_cache=False
        ).last_hidden_state
        return hidden.reshape(-1, hidden.shape[-1])


def _scatter(values: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """`(N,)` per-target values placed into a zero `(B, T)` float32 grid (differentiable wrt `values`)."""
    grid = torch.zeros(shape, dtype=torch.float32, device=values.device)
    return grid.index_put((rows, cols), values.float())


def forward_micro_batch(
    network: torch.nn.Module, micro_batch: Batch, spec: ForwardSpec, *, input_layout: InputLayout, chunk_size: int
) -> ForwardOutput:
    """Run `network` on one micro-batch (tensors on the network's device) and return its `(b, T)` outputs (a VLA's:
    `(b, S*A)`)."""
    if isinstance(network, VLANetwork):
        return vla_forward_micro_batch(network, micro_batch, spec)
    inputs = lay_out(micro_batch, spec.response_only, input_layout)
    return network(
        inputs.input_ids,
        inputs.position_ids,
        inputs.attention_mask,
        inputs.source,
        inputs.labels,
        inputs.rows,
        inputs.cols,
        inputs.shape,
        inputs.prefix,
        spec,
        chunk_size,
    )
