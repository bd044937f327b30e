"""`TinyVLAConfig`: the transformers config of the tiny VLA (image, action head and trunk sizes)."""

from __future__ import annotations

from typing import Any

from transformers import AutoConfig, PretrainedConfig

from rl_engines.vla._errors import VLAError

MODEL_TYPE = "tiny_vla"
"""`config.json`'s `model_type` of a tiny VLA folder: what the train engine and `AutoConfig` recognise it by."""


def conv_output_size(size: int, layers: int) -> int:
    """A side of `size` pixels after `layers` convs of kernel 3, stride 2, padding 1."""
    for _ in range(layers):
        size = (size - 1) // 2 + 1
    return size


class TinyVLAConfig(PretrainedConfig):
    """A small pixel + language policy with an OFT-style parallel action-chunk head.

    Args:
        image_shape: `(C, H, W)` of one uint8 frame.
        chunk_size: K, env steps per action chunk (one forward emits K * D action tokens).
        action_dims: D, numbers per env step.
        action_bins: bins per action dim (the head's logits are over these).
        vocab_size: the instruction word vocabulary (`WordTokenizer`'s size or more).
        max_instruction_len: the most instruction tokens a forward takes.
        hidden_size: trunk width.
        num_hidden_layers: transformer encoder layers.
        num_attention_heads: attention heads (divides hidden_size).
        intermediate_size: MLP width.
        conv_channels: output channels of each stride-2 conv of the stem.
        initializer_range: std of the normal initialisation.
    """

    model_type = MODEL_TYPE

    def __init__(
        self,
        image_shape: tuple[int, int, int] | list[int] = (3, 56, 56),
        chunk_size: int = 4,
        action_dims: int = 1,
        action_bins: int = 3,
        vocab_size: int = 64,
        max_instruction_len: int = 16,
        hidden_size: int = 64,
        num_hidden_layers: int = 2,
        num_attention_heads: int = 4,
        intermediate_size: int = 128,
        conv_channels: tuple[int, ...] | list[int] = (16, 32, 64),
        initializer_range: float = 0.02,
        **kwargs: Any,
    ) -> None:
        self.image_shape = tuple(int(x) for x in image_shape)
        self.chunk_size = int(chunk_size)
        self.action_dims = int(action_dims)
        self.action_bins = int(action_bins)
        self.vocab_size = int(vocab_size)
        self.max_instruction_len = int(max_instruction_len)
        self.hidden_size = int(hidden_size)
        self.num_hidden_layers = int(num_hidden_layers)
        self.num_attention_heads = int(num_attention_heads)
        self.num_key_value_heads = int(num_attention_heads)
        self.intermediate_size = int(intermediate_size)
        self.conv_channels = tuple(int(x) for x in conv_channels)
        self.initializer_range = float(initializer_range)
        kwargs.pop("num_key_value_heads", None)
        kwargs.setdefault("tie_word_embeddings", False)
        super().__init__(**kwargs)
        self._check()

    @property
    def action_tokens_per_chunk(self) -> int:
        """A = K * D: action tokens one forward emits."""
        return self.chunk_size * self.action_dims

    @property
    def num_patches(self) -> int:
        """Image tokens after the conv stem."""
        _, height, width = self.image_shape
        layers = len(self.conv_channels)
        return conv_output_size(height, layers) * conv_output_size(width, layers)

    def _check(self) -> None:
        if len(self.image_shape) != 3 or min(self.image_shape) < 1:
            raise VLAError(f"TinyVLAConfig.image_shape must be (C, H, W) of positive sizes, got {self.image_shape}")
        positive = {
            "chunk_size": self.chunk_size,
            "action_dims": self.action_dims,
            "vocab_size": self.vocab_size,
            "max_instruction_len": self.max_instruction_len,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "intermediate_size": self.intermediate_size,
        }
        for name, value in positive.items():
            if value < 1:
                raise VLAError(f"TinyVLAConfig.{name} must be >= 1, got {value}")
        if self.action_bins < 2:
            raise VLAError(f"TinyVLAConfig.action_bins must be >= 2, got {self.action_bins}")
        if self.hidden_size % self.num_attention_heads:
            raise VLAError(
                f"TinyVLAConfig.hidden_size={self.hidden_size} must be a multiple of "
                f"num_attention_heads={self.num_attention_heads}"
            )
        if not self.conv_channels or min(self.conv_channels) < 1:
            raise VLAError(f"TinyVLAConfig.conv_channels must be positive channel counts, got {self.conv_channels}")


AutoConfig.register(MODEL_TYPE, TinyVLAConfig, exist_ok=True)
