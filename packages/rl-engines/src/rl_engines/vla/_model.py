"""`TinyVLAForActionChunking`: conv stem over the frame, word embeddings for the instruction, a small transformer
encoder, and OFT-style learned action queries that give all K * D action logits in one forward."""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from rl_core.schema import INPUT_IDS
from rl_engines.vla._config import TinyVLAConfig
from rl_engines.vla._errors import VLAError


class TinyVLALayer(torch.nn.Module):
    """A pre-norm transformer encoder block (bidirectional attention with a key mask, then a GELU MLP)."""

    def __init__(self, config: TinyVLAConfig) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.attn_norm = torch.nn.LayerNorm(hidden)
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.out = torch.nn.Linear(hidden, hidden)
        self.mlp_norm = torch.nn.LayerNorm(hidden)
        self.up = torch.nn.Linear(hidden, config.intermediate_size)
        self.down = torch.nn.Linear(config.intermediate_size, hidden)

    def forward(self, hidden: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        """`hidden` (B, N, H), `key_mask` (B, 1, 1, N) bool (True: attend) -> (B, N, H)."""
        batch, length, width = hidden.shape
        q, k, v = self.qkv(self.attn_norm(hidden)).view(batch, length, 3, self.num_heads, -1).unbind(2)
        attended = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=key_mask
        )
        hidden = hidden + self.out(attended.transpose(1, 2).reshape(batch, length, width))
        return hidden + self.down(F.gelu(self.up(self.mlp_norm(hidden))))


class TinyVLAPreTrainedModel(PreTrainedModel):
    """Weight initialisation and the transformers plumbing shared by the tiny VLA's classes."""

    config_class = TinyVLAConfig
    config: TinyVLAConfig
    base_model_prefix = "vla"
    main_input_name = INPUT_IDS
    _no_split_modules: ClassVar[list[str]] = ["TinyVLALayer"]
    _supports_sdpa = True

    @torch.no_grad()
    def _init_weights(self, module: torch.nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, (torch.nn.Linear, torch.nn.Conv2d)):
            torch.nn.init.normal_(module.weight, std=std)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, torch.nn.Embedding):
            torch.nn.init.normal_(module.weight, std=std)
        elif isinstance(module, torch.nn.LayerNorm):
            torch.nn.init.ones_(module.weight)
            torch.nn.init.zeros_(module.bias)
        elif isinstance(module, TinyVLAForActionChunking):
            for parameter in (module.image_positions, module.word_positions, module.action_queries):
                torch.nn.init.normal_(parameter, std=std)


class TinyVLAForActionChunking(TinyVLAPreTrainedModel):
    """The tiny VLA: `forward(input_ids, attention_mask, pixel_values) -> (B, K*D, action_bins)` logits.

    The sequence the trunk sees is `[image patches, instruction words, K*D action queries]`; padded instruction
    words are masked out as keys; the logits of action token `i` are read at query `i` (parallel decoding, as
    OpenVLA-OFT). Pixels are uint8, scaled to [0, 1] inside.
    """

    def __init__(self, config: TinyVLAConfig) -> None:
        super().__init__(config)
        channels_in = config.image_shape[0]
        convs: list[torch.nn.Module] = []
        for channels in config.conv_channels:
            convs += [torch.nn.Conv2d(channels_in, channels, kernel_size=3, stride=2, padding=1), torch.nn.GELU()]
            channels_in = channels
        self.stem = torch.nn.Sequential(*convs)
        hidden = config.hidden_size
        self.patch_proj = torch.nn.Linear(channels_in, hidden)
        self.image_positions = torch.nn.Parameter(torch.zeros(config.num_patches, hidden))
        self.word_embeddings = torch.nn.Embedding(config.vocab_size, hidden)
        self.word_positions = torch.nn.Parameter(torch.zeros(config.max_instruction_len, hidden))
        self.action_queries = torch.nn.Parameter(torch.zeros(config.action_tokens_per_chunk, hidden))
        self.layers = torch.nn.ModuleList(TinyVLALayer(config) for _ in range(config.num_hidden_layers))
        self.norm = torch.nn.LayerNorm(hidden)
        self.action_head = torch.nn.Linear(hidden, config.action_bins)
        self.post_init()

    def get_input_embeddings(self) -> torch.nn.Module:
        return self.word_embeddings

    def get_output_embeddings(self) -> None:
        """No LM head: the action head's logits are over the action bins, not a vocabulary."""
        return None

    def forward(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, pixel_values: torch.Tensor
    ) -> torch.Tensor:
        """Action logits of one chunk per row.

        Args:
            input_ids: (B, L) instruction word ids, right-padded, L <= max_instruction_len.
            attention_mask: (B, L) 1 on real words, 0 on padding.
            pixel_values: (B, C, H, W) uint8 frames (or floats in [0, 1]).

        Returns:
            (B, K*D, action_bins) logits, token `k*D + d` for env step `k` of the chunk, dim `d`.
        """
        self._check_inputs(input_ids, pixel_values)
        batch, length = input_ids.shape
        weight = self.patch_proj.weight
        frames = pixel_values.to(weight.dtype) / 255.0 if not pixel_values.is_floating_point() else pixel_values
        patches = self.stem(frames.to(weight.dtype)).flatten(2).transpose(1, 2)
        image = self.patch_proj(patches) + self.image_positions
        words = self.word_embeddings(input_ids) + self.word_positions[:length]
        queries = self.action_queries.unsqueeze(0).expand(batch, -1, -1)
        hidden = torch.cat([image, words, queries.to(image.dtype)], dim=1)
        ones = torch.ones(batch, 1, dtype=torch.bool, device=input_ids.device)
        key_mask = torch.cat(
            [
                ones.expand(batch, image.shape[1]),
                attention_mask.bool(),
                ones.expand(batch, queries.shape[1]),
            ],
            dim=1,
        )[:, None, None, :]
        for layer in self.layers:
            hidden = layer(hidden, key_mask)
        return self.action_head(self.norm(hidden[:, -queries.shape[1] :]))

    def _check_inputs(self, input_ids: torch.Tensor, pixel_values: torch.Tensor) -> None:
        config = self.config
        if input_ids.dim() != 2 or input_ids.shape[1] > config.max_instruction_len:
            raise VLAError(
                f"input_ids must be (B, L) with L <= max_instruction_len={config.max_instruction_len}, got "
                f"{tuple(input_ids.shape)}; shorten the instruction or raise TinyVLAConfig.max_instruction_len"
            )
        if tuple(pixel_values.shape[1:]) != config.image_shape or pixel_values.shape[0] != input_ids.shape[0]:
            raise VLAError(
                f"pixel_values must be (B, C, H, W) with B={input_ids.shape[0]} and (C, H, W)={config.image_shape} "
                f"(TinyVLAConfig.image_shape), got {tuple(pixel_values.shape)}"
            )
