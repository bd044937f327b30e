"""The OpenVLA-OFT path: a Prismatic checkpoint loaded from a local folder (its own modeling code, run with
`trust_remote_code=True, local_files_only=True`) and OFT's parallel decoding of one action chunk per forward.

One forward, per row (as OpenVLA-OFT trains and siiRL samples): the sequence is `<s>`, the image patches
(`vision_backbone` -> `projector`), the rest of the prompt `In: What action should the robot take to {task}?\\nOut:`
with its trailing empty token, K*D action placeholders whose input embeddings are zero, and the stop token `</s>`.
Attention is bidirectional over the whole sequence (OFT's patched Llama; here a 4D mask that hides only padding), and
the logits of action token `a` are read where the causal LM predicts the token after position `P + n - 1 + a` (the
last prompt token for a = 0, placeholder a - 1 after it), then restricted to the 256 action-token ids
(`vocab_size - 1 - bin`, siiRL's `logits[..., -256-64:-64]`) and ordered by bin. Position ids count only real
tokens, so a row's logits do not depend on how much padding its batch needed.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from rl_engines.vla._errors import VLAError
from rl_engines.vla._openvla_spec import OPENVLA_MODEL_TYPE, OpenVLASpec, prismatic_pixels, read_openvla_spec

logger = logging.getLogger(__name__)

PROMPT = "In: What action should the robot take to {instruction}?\nOut:"
"""OpenVLA's prompt; the instruction is lower-cased."""
EMPTY_TOKEN = "\u2581"
"""SentencePiece's empty piece that OFT's training prompts end with (Llama 2's id 29871)."""
INSTALL_HINT = "pip install 'rl-engines[openvla]'"
_MODEL_CLASS_KEYS = ("AutoModelForVision2Seq", "AutoModelForImageTextToText", "AutoModelForCausalLM")


def is_openvla_folder(folder: str | os.PathLike[str] | None) -> bool:
    """Whether `folder` holds a checkpoint whose `config.json` says `model_type: openvla`."""
    if folder is None:
        return False
    try:
        fields = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return False  # no readable config: whatever loads the folder says what is wrong with it
    return isinstance(fields, dict) and fields.get("model_type") == OPENVLA_MODEL_TYPE


def _model_class(folder: Path) -> type:
    from transformers import AutoConfig
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    config = AutoConfig.from_pretrained(str(folder), trust_remote_code=True, local_files_only=True)
    auto_map = getattr(config, "auto_map", None) or {}
    for key in _MODEL_CLASS_KEYS:
        if key in auto_map:
            return get_class_from_dynamic_module(auto_map[key], str(folder), local_files_only=True)
    raise VLAError(
        f"{folder / 'config.json'} has no auto_map entry for the model class (one of {list(_MODEL_CLASS_KEYS)}); "
        "the OpenVLA-OFT path loads the checkpoint's own modeling_prismatic.py"
    )


def load_openvla(
    folder: str | os.PathLike[str], dtype: torch.dtype = torch.bfloat16
) -> tuple[torch.nn.Module, OpenVLASpec]:
    """The checkpoint's Prismatic model (its remote code, weights in `dtype`, on the CPU, in eval mode) and its spec.

    Raises:
        VLAError: the folder lacks a file the path needs, or the checkpoint's code needs a package that is not
            installed (the message names the `pip install`).
    """
    root = Path(folder)
    spec = read_openvla_spec(root)
    try:
        cls = _model_class(root)
        model = cls.from_pretrained(str(root), dtype=dtype, local_files_only=True, trust_remote_code=True)
    except ImportError as error:  # transformers' own check of the remote code's imports raises a plain ImportError
        raise VLAError(
            f"the checkpoint's modeling code at {str(root)!r} needs a package that is not installed "
            f"({' '.join(str(error).split())}); {INSTALL_HINT} (timm for the Prismatic vision backbones)"
        ) from error
    for name in ("vision_backbone", "projector", "language_model"):
        if not isinstance(getattr(model, name, None), torch.nn.Module):
            raise VLAError(
                f"{type(model).__name__} from {str(root)!r} has no {name} module; the OpenVLA-OFT path needs a "
                "Prismatic model (vision_backbone, projector, language_model)"
            )
    # FSDP2 wraps one unit per block: the Prismatic wrapper names only its projector, so add the LLM's layers.
    language_units = getattr(model.language_model, "_no_split_modules", None) or []
    model._no_split_modules = sorted({*(model._no_split_modules or []), *language_units})
    model.eval()
    logger.info("loaded %s from %s (unnorm_key %s)", type(model).__name__, root, spec.unnorm_key)
    return model, spec


class OpenVLAActions:
    """`(input_ids, attention_mask, pixel_values) -> (N, K*D, action_bins)` logits of a Prismatic model (the
    callable `action_log_probs` and `VLAPolicy` take); `config` is the checkpoint's `OpenVLASpec`.

    Not a module: it reads the model's submodules, so under FSDP2 the wrapped root's hooks stay in charge.
    """

    def __init__(self, model: torch.nn.Module, spec: OpenVLASpec) -> None:
        self.model = model
        self.config = spec
        # Restricted logits ordered by bin: bin b is token vocab_size - 1 - b.
        self._bin_token_ids = spec.vocab_size - 1 - torch.arange(spec.action_bins)

    def __call__(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, pixel_values: torch.Tensor
    ) -> torch.Tensor:
        """Action logits of one chunk per row.

        Args:
            input_ids: (N, L) prompt token ids (from `OpenVLAPrompt.encode`: `<s>` first, the empty token last),
                padded on either side.
            attention_mask: (N, L) 1 on real tokens.
            pixel_values: (N, 3, H, W) uint8 RGB frames (resized and normalised here).

        Returns:
            (N, K*D, action_bins) logits in the model's dtype, token `k*D + d` for step `k`, dim `d`.
        """
        model: Any = self.model  # the checkpoint's own class: its submodules are known by name only
        spec = self.config
        embed = model.get_input_embeddings()
        device = input_ids.device
        batch, width = input_ids.shape[0], spec.action_tokens_per_chunk
        mask = attention_mask.bool()
        lengths = mask.sum(dim=1)
        if bool((lengths < 2).any()):
            raise VLAError(
                "every OpenVLA-OFT prompt needs <s> and at least one more token; encode it with OpenVLAPrompt"
            )
        # Move each row's real tokens to the right end (a stable sort), so every row's last prompt token sits in the
        # same column and one `logits_to_keep` serves the batch.
        order = torch.argsort(mask.to(torch.int8), dim=1, stable=True)
        ids = input_ids.gather(1, order)
        mask = mask.gather(1, order)
        prompt = embed(ids)
        dtype = prompt.dtype  # the compute dtype (under FSDP2 mixed precision, not the stored weights')
        patches = model.projector(model.vision_backbone(prismatic_pixels(pixel_values, spec, dtype))).to(dtype)
        num_patches = patches.shape[1]
        stop = torch.full((batch, 1), spec.stop_token_id, dtype=ids.dtype, device=device)
        placeholders = torch.zeros(batch, width, prompt.shape[2], dtype=dtype, device=device)
        sequence = torch.cat([prompt, patches, placeholders, embed(stop)], dim=1)
        # Positions as OFT's unpadded sequence <s>, patches, prompt[1:], actions, stop: <s> is the row's first real
        # token; its other prompt tokens come after the patches.
        rank = mask.long().cumsum(dim=1) - 1  # 0 for <s>
        prompt_pos = torch.where(rank > 0, rank + num_patches, 0)  # <s> and padding at 0 (padding is never a key)
        tail = torch.arange(width + 1, device=device)
        positions = torch.cat(
            [
                prompt_pos,
                1 + torch.arange(num_patches, device=device).expand(batch, -1),
                lengths[:, None] + num_patches + tail,
            ],
            dim=1,
        )
        keys = torch.cat([mask, torch.ones(batch, num_patches + width + 1, dtype=torch.bool, device=device)], dim=1)
        bias = torch.zeros(keys.shape, dtype=dtype, device=device).masked_fill(~keys, torch.finfo(dtype).min)
        length = ids.shape[1]
        read = torch.cat([torch.tensor([length - 1]), length + num_patches + torch.arange(width - 1)]).to(device)
        output = model.language_model(
            inputs_embeds=sequence,
            attention_mask=bias[:, None, None, :],
            position_ids=positions,
            use_cache=False,
            logits_to_keep=read,
        )
        return output.logits[..., self._bin_token_ids.to(device)]


class OpenVLAPrompt:
    """Instruction text -> OpenVLA prompt token ids with the checkpoint's own tokenizer (read from its folder)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        from transformers import AutoTokenizer

        self.tokenizer: Any = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=True)
        self.empty_token_id = int(self.tokenizer.convert_tokens_to_ids(EMPTY_TOKEN))

    def encode(self, instruction: str) -> tuple[int, ...]:
        """The ids of `PROMPT` with `instruction` lower-cased: `<s>` first, OFT's empty token last."""
        ids = list(self.tokenizer(PROMPT.format(instruction=instruction.lower())).input_ids)
        if not ids or ids[-1] != self.empty_token_id:
            ids.append(self.empty_token_id)
        return tuple(int(i) for i in ids)

    def decode(self, token_ids: Sequence[int]) -> str:
        """The text of `token_ids` (the whole prompt, special tokens dropped)."""
        return str(self.tokenizer.decode(list(token_ids), skip_special_tokens=True))

    def encode_batch(self, instructions: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """N instructions -> (input_ids (N, L), attention_mask (N, L)) int64, right-padded with 0."""
        encoded = [self.encode(text) for text in instructions]
        length = max(len(ids) for ids in encoded)
        input_ids = torch.zeros(len(encoded), length, dtype=torch.int64)
        attention_mask = torch.zeros(len(encoded), length, dtype=torch.int64)
        for row, ids in enumerate(encoded):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention_mask[row, : len(ids)] = 1
        return input_ids, attention_mask
