"""Tiny causal LMs built from a config in code, saved as HF checkpoints, with plain-transformers references."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel, Qwen2Config, Qwen2ForCausalLM

from rl_engines.rollout import parse_dtype, weights_checksum

logger = logging.getLogger(__name__)

PROMPT_SEED = 1234


@dataclass(frozen=True)
class TinyModelSpec:
    """The architecture of the conformance model; defaults run fast on CPU.

    vLLM's CPU attention needs head_dim >= 32 (64 verified): use hidden_size 256 with 4 heads there.
    `init_std` is large so that logits are spread out and greedy decoding rarely meets near-ties.
    """

    arch: Literal["qwen2", "llama"] = "qwen2"
    vocab_size: int = 128
    hidden_size: int = 64
    intermediate_size: int = 128
    num_layers: int = 2
    num_heads: int = 2
    num_kv_heads: int = 1
    context_len: int = 256
    init_std: float = 0.2
    dtype: str = "float32"

    def build(self, seed: int) -> PreTrainedModel:
        """A randomly initialised model (weights drawn from `torch.manual_seed(seed)`), in eval mode."""
        common: dict[str, Any] = dict(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_hidden_layers=self.num_layers,
            num_attention_heads=self.num_heads,
            num_key_value_heads=self.num_kv_heads,
            max_position_embeddings=self.context_len,
            initializer_range=self.init_std,
            tie_word_embeddings=False,
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
        )
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            if self.arch == "qwen2":
                model: PreTrainedModel = Qwen2ForCausalLM(Qwen2Config(**common))
            else:
                model = LlamaForCausalLM(LlamaConfig(**common))
        # transformers wraps PreTrainedModel.to in functools.wraps(Module.to), which the checker binds wrongly.
        return model.to(parse_dtype(self.dtype)).eval().requires_grad_(False)  # pyright: ignore[reportArgumentType]


V1 = 1
"""Policy version of the v1 weights: an engine under test starts serving `v1_dir` with `initial_version=V1`."""
V2 = 2
"""Policy version of the v2 weights."""


@dataclass
class ConformanceModels:
    """Two weight versions of one tiny model, in memory and saved as HF checkpoints under `root`."""

    V1: ClassVar[int] = V1
    V2: ClassVar[int] = V2
    spec: TinyModelSpec
    root: Path
    v1: PreTrainedModel
    v2: PreTrainedModel
    v1_dir: Path
    v2_dir: Path

    @classmethod
    def create(cls, root: str | Path, spec: TinyModelSpec | None = None) -> ConformanceModels:
        """Build v1 (seed 0) and v2 (seed 1) and save them to `root/v1`, `root/v2`."""
        spec = spec or TinyModelSpec()
        root = Path(root)
        models = {}
        for version, seed in (("v1", 0), ("v2", 1)):
            model = spec.build(seed)
            model.save_pretrained(root / version)
            models[version] = model
        return cls(spec, root, models["v1"], models["v2"], root / "v1", root / "v2")

    @property
    def names(self) -> list[str]:
        """The state-dict names of the model, sorted."""
        return sorted(self.v1.state_dict())

    def state(self, version: int) -> dict[str, torch.Tensor]:
        """The state dict of the v1 (`V1`) or v2 (`V2`) weights."""
        return dict((self.v1 if version == V1 else self.v2).state_dict())

    def checksum(self, state: dict[str, torch.Tensor], names: list[str] | None = None) -> str:
        """`weights_checksum` of `state` restricted to `names`."""
        return weights_checksum((n, state[n]) for n in (names if names is not None else sorted(state)))

    def model_with(self, state: dict[str, torch.Tensor]) -> PreTrainedModel:
        """A fresh model holding `state` (for references of mixed / partial weights)."""
        model = self.spec.build(0)
        model.load_state_dict(state)
        return model

    def prompts(self, count: int, *, min_len: int = 3, max_len: int = 12, seed: int = PROMPT_SEED) -> list[list[int]]:
        """`count` prompts of varied length with token ids in [1, vocab)."""
        generator = torch.Generator().manual_seed(seed)
        lengths = torch.randint(min_len, max_len + 1, (count,), generator=generator).tolist()
        return [torch.randint(1, self.spec.vocab_size, (n,), generator=generator).tolist() for n in lengths]


@torch.no_grad()
def reference_greedy(model: PreTrainedModel, prompt: list[int], max_new_tokens: int) -> tuple[list[int], list[float]]:
    """`model.generate` greedy output ids for one unpadded prompt, and the top-1 minus top-2 logit margin
    at each generated position (small margins are near-ties where engines may legitimately differ)."""
    ids = torch.tensor([prompt])
    # generate comes from GenerationMixin, which the PreTrainedModel type lacks (and whose self-type transformers'
    # own models do not satisfy).
    out = model.generate(  # pyright: ignore[reportCallIssue]
        ids, do_sample=False, max_new_tokens=max_new_tokens, eos_token_id=None, pad_token_id=0
    )
    generated = out[0, len(prompt) :].tolist()
    logits = model(out).logits[0, len(prompt) - 1 : -1].float()
    top2 = logits.topk(2, dim=-1).values
    return generated, (top2[:, 0] - top2[:, 1]).tolist()


@torch.no_grad()
def reference_logprobs(model: PreTrainedModel, prompt: list[int], output: list[int], temperature: float) -> list[float]:
    """Log-probs of `output` after `prompt` from one full forward: `log_softmax(logits / T)` (T = 0 -> 1)."""
    ids = torch.tensor([prompt + output])
    logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    scale = temperature if temperature > 0 else 1.0
    logprobs = torch.log_softmax(logits / scale, dim=-1)
    return logprobs.gather(-1, torch.tensor(output).unsqueeze(-1)).squeeze(-1).tolist()


def greedy_mismatch(got: list[int], expected: list[int], margins: list[float], tie_tol: float) -> str | None:
    """None when `got` equals `expected`, or first differs where the reference had a near-tie
    (margin < `tie_tol`, after which the sequences may diverge); otherwise a description of the mismatch."""
    for i, (a, b) in enumerate(zip(got, expected, strict=False)):
        if a != b:
            if margins[i] < tie_tol:
                return None
            return f"token {i}: got {a}, reference {b} (margin {margins[i]:.4g}); got {got}, reference {expected}"
    if len(got) != len(expected):
        return f"length {len(got)} != reference length {len(expected)}: got {got}, reference {expected}"
    return None
