"""The train engine's VLA path: a `TinyVLAForActionChunking` (`model_type: tiny_vla`) or an OpenVLA-OFT checkpoint
(`model_type: openvla`, `rl_engines.vla.load_openvla`) built from `ModelConfig` (recognised by its config's
`model_type`), its network wrapper, its per-micro-batch forward and its micro-batch cost.

A VLA batch carries the instruction in `instruction_ids`/`instruction_mask` `(B, L)`, the frames `pixel_values`
`(B, S, C, H, W)`, the emitted bins `action_tokens` `(B, S, A)` and `response_mask` `(B, S*A)`; the engine's
per-token outputs are `(B, S*A)`, aligned with `response_mask` (`rl_engines.vla.action_log_probs`). Only steps with
a valid token run through the trunk (under `ForwardSpec.response_only`), so a trajectory's padded tail costs
nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from rl_core.schema import ACTION_TOKENS, INSTRUCTION_IDS, INSTRUCTION_MASK, PIXEL_VALUES, RESPONSE_MASK
from rl_engines.training._config_model import ModelConfig, check_openvla_settings
from rl_engines.training._errors import BatchError, ModelSourceError, TrainConfigError
from rl_engines.training._model import load_hf_config
from rl_engines.training._types import Batch, ForwardOutput, ForwardSpec
from rl_engines.vla import (
    MODEL_TYPE,
    OPENVLA_MODEL_TYPE,
    TOKENIZER_FILE,
    OpenVLAActions,
    OpenVLASpec,
    TinyVLAConfig,
    TinyVLAForActionChunking,
    WordTokenizer,
    load_openvla,
)
from rl_engines.vla import action_log_probs as vla_action_log_probs

logger = logging.getLogger(__name__)


def model_type(config: ModelConfig) -> str | None:
    """The `model_type` of the model `config` names, read without building anything (None when unknown)."""
    if config.path is not None:
        file = Path(config.path) / "config.json"
        if not file.is_file():
            return None  # build_causal_lm's folder checks then say what is missing
        return json.loads(file.read_text()).get("model_type")
    if isinstance(config.hf_config, Mapping):
        return config.hf_config.get("model_type")
    return getattr(config.hf_config, "model_type", None)


VLA_MODEL_TYPES = (MODEL_TYPE, OPENVLA_MODEL_TYPE)
"""The `model_type`s the engine builds as a VLA: the tiny VLA and OpenVLA-OFT checkpoints."""


def is_vla(config: ModelConfig) -> bool:
    """Whether `config` names a VLA (`model_type` tiny_vla or openvla)."""
    return model_type(config) in VLA_MODEL_TYPES


def _check_supported(config: ModelConfig) -> None:
    if model_type(config) == OPENVLA_MODEL_TYPE:
        check_openvla_settings(config)
        return
    if config.value_head:
        raise TrainConfigError(
            "ModelConfig.value_head=True: a tiny VLA has no value head (SRPO/GRPO need no critic); set it to false",
            field="value_head",
            expected="false for a tiny_vla model",
            found=True,
            fix="set model.value_head: false",
        )
    if config.gradient_checkpointing:
        raise TrainConfigError(
            "ModelConfig.gradient_checkpointing=True is not built for a tiny VLA (it is ~100k parameters); set it "
            "to false",
            field="gradient_checkpointing",
            expected="false for a tiny_vla model",
            found=True,
            fix="set model.gradient_checkpointing: false",
        )


def _check_tokenizer(config: ModelConfig, vla_config: TinyVLAConfig) -> None:
    folder = config.tokenizer_path or config.path
    if folder is None or not (Path(folder) / TOKENIZER_FILE).is_file():
        return
    size = len(WordTokenizer.from_pretrained(folder))
    if size > vla_config.vocab_size:
        raise ModelSourceError(
            f"the word tokenizer at {str(folder)!r} has {size} words but the VLA's vocab_size is "
            f"{vla_config.vocab_size}; build the model with TinyVLAConfig(vocab_size>={size})"
        )


def build_vla(config: ModelConfig, dtype: torch.dtype, *, meta: bool = False) -> VLANetwork:
    """The VLA network on the CPU in `dtype`: the tiny VLA read from `path` or initialised under `init_seed` from
    `hf_config` (with `meta`, its skeleton on the meta device), or an OpenVLA-OFT checkpoint read from `path`."""
    _check_supported(config)
    if model_type(config) == OPENVLA_MODEL_TYPE:
        if meta or config.path is None:
            raise ModelSourceError("an OpenVLA-OFT model is read from its checkpoint folder (model.path), in full")
        model, spec = load_openvla(config.path, dtype)
        return VLANetwork(model, OpenVLAActions(model, spec), spec)
    vla_config = load_hf_config(config)
    if not isinstance(vla_config, TinyVLAConfig):
        raise ModelSourceError(
            f"the model's config has model_type {MODEL_TYPE!r} but loads as {type(vla_config).__name__}; "
            "import rl_engines.vla before building it"
        )
    _check_tokenizer(config, vla_config)
    if meta:
        with torch.device("meta"):
            model = TinyVLAForActionChunking(vla_config)
    elif config.path is not None:
        model = TinyVLAForActionChunking.from_pretrained(config.path, local_files_only=True)
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.init_seed)
            model = TinyVLAForActionChunking(vla_config)
    torch.nn.Module.to(model, dtype)
    logger.info("built %s with %d parameters", type(model).__name__, sum(p.numel() for p in model.parameters()))
    return VLANetwork(model, model, model.config)


class VLANetwork(torch.nn.Module):
    """A VLA as the engine's FSDP2 root: `backbone` is the Hugging Face model (its weights, under their names),
    `actions` the `(ids, mask, pixels) -> (N, A, bins)` logits callable over it (the tiny VLA itself, or
    `OpenVLAActions`), `spec` its action head's description (`TinyVLAConfig` or `OpenVLASpec`); no value head."""

    def __init__(
        self,
        backbone: torch.nn.Module,
        actions: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
        spec: TinyVLAConfig | OpenVLASpec,
    ) -> None:
        super().__init__()
        self.backbone: Any = backbone
        # Kept out of the module tree (the tiny VLA *is* the backbone; OpenVLAActions only reads it), so the state
        # dict and FSDP2 see each weight once, under the backbone's names.
        self.__dict__["_actions"] = actions
        self._actions: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
        self.spec = spec
        self.value_head: torch.nn.Module | None = None

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        pixel_values: torch.Tensor,
        action_tokens: torch.Tensor,
        steps: torch.Tensor | None,
        temperature: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(log_probs, entropy), each `(B, S*A)` float32 (see `rl_engines.vla.action_log_probs`)."""
        return vla_action_log_probs(
            self._actions, input_ids, attention_mask, pixel_values, action_tokens, temperature, steps=steps
        )


def check_vla_batch(batch: Batch, network: VLANetwork) -> None:
    """Raise `BatchError` unless `batch` carries the VLA fields with shapes that agree with each other and the model."""
    missing = [key for key in (INSTRUCTION_IDS, INSTRUCTION_MASK, PIXEL_VALUES, ACTION_TOKENS) if key not in batch]
    if missing:
        raise BatchError(
            f"a VLA batch needs {[INSTRUCTION_IDS, INSTRUCTION_MASK, PIXEL_VALUES, ACTION_TOKENS]}; missing {missing}, "
            f"found {sorted(batch)}"
        )
    config = network.spec
    actions = batch[ACTION_TOKENS]
    width = config.action_tokens_per_chunk
    if actions.dim() != 3 or actions.shape[2] != width:
        raise BatchError(
            f"action_tokens must be (B, S, A) with A = chunk_size * action_dims = {width}, got {tuple(actions.shape)}"
        )
    pixels = batch[PIXEL_VALUES]
    if pixels.dim() != 5 or tuple(pixels.shape[1:2]) != tuple(actions.shape[1:2]):
        raise BatchError(
            f"pixel_values must be (B, S, C, H, W) with S={actions.shape[1]} like action_tokens, got "
            f"{tuple(pixels.shape)}"
        )
    if RESPONSE_MASK in batch and tuple(batch[RESPONSE_MASK].shape[1:]) != (actions.shape[1] * width,):
        raise BatchError(
            f"a VLA batch's response_mask must be (B, S*A) = (B, {actions.shape[1] * width}), got "
            f"{tuple(batch[RESPONSE_MASK].shape)}"
        )


def output_shape(batch: Batch) -> tuple[int, int]:
    """`(B, S*A)`: the shape of a VLA batch's per-token outputs."""
    batch_size, steps, width = batch[ACTION_TOKENS].shape
    return batch_size, steps * width


def _computed_steps(batch: Batch, spec: ForwardSpec) -> torch.Tensor | None:
    """`(B, S)` bool: the steps with a valid token (response_only with a response_mask), else None (every step)."""
    if not spec.response_only or RESPONSE_MASK not in batch:
        return None
    batch_size, steps, width = batch[ACTION_TOKENS].shape
    computed = batch[RESPONSE_MASK].bool().view(batch_size, steps, width).any(dim=-1)
    # A row without a valid token still runs its first step: under FSDP2 every rank must run the trunk in every
    # micro-batch (its collectives pair up), and its outputs are masked to 0 anyway.
    computed[:, 0] |= ~computed.any(dim=-1)
    return computed


def token_counts(batch: Batch, network: VLANetwork, spec: ForwardSpec | None = None) -> torch.Tensor:
    """`(B,)` int64: the tokens the trunk processes for each row (computed steps x (patches + words + A)), the cost
    the micro-batch budget counts."""
    config = network.spec
    steps = _computed_steps(batch, spec or ForwardSpec())
    num_steps = batch[ACTION_TOKENS].shape[1]
    per_row = steps.sum(dim=-1) if steps is not None else torch.full((batch[INSTRUCTION_IDS].shape[0],), num_steps)
    words = batch[INSTRUCTION_MASK].bool().sum(dim=-1)
    per_step = config.num_patches + words + config.action_tokens_per_chunk
    return (per_row * per_step).cpu().to(torch.int64)


def vla_forward_micro_batch(network: torch.nn.Module, micro_batch: Batch, spec: ForwardSpec) -> ForwardOutput:
    """Run the VLA network on one micro-batch; `(b, S*A)` log-probs/entropy, 0 outside `response_mask` under
    `response_only`."""
    if spec.values:
        raise TrainConfigError("ForwardSpec(values=True): a tiny VLA has no value head")
    steps = _computed_steps(micro_batch, spec)
    log_probs, entropy = network(
        micro_batch[INSTRUCTION_IDS],
        micro_batch[INSTRUCTION_MASK],
        micro_batch[PIXEL_VALUES],
        micro_batch[ACTION_TOKENS],
        steps,
        spec.temperature,
    )
    if steps is not None:
        mask = micro_batch[RESPONSE_MASK].to(log_probs.dtype)
        log_probs, entropy = log_probs * mask, entropy * mask
    return ForwardOutput(log_probs if spec.log_probs else None, entropy if spec.entropy else None, None)
