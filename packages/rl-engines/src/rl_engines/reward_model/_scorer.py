"""`RewardModelScorer`: a sequence-classification model (one label) giving each prompt + response one score."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rl_engines._errors import EngineError
from rl_engines.reward_model._config import RewardModelConfig

logger = logging.getLogger(__name__)


class RewardModelError(EngineError, ValueError):
    """The reward model folder is missing, is not a one-label classifier, or does not fit the policy's tokens."""


@dataclass(frozen=True)
class RewardScores:
    """What one scoring call found."""

    scores: torch.Tensor
    """`(B,)` float32 on the CPU, in input order."""
    truncated: int
    """Inputs longer than the model's limit, scored on their last `max_length` tokens."""


def load_reward_tokenizer(path: str | Path) -> Any:
    """The tokenizer saved in the reward model's folder `path`."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def check_folder(path: str) -> Path:
    """`path` as a Path after checking it holds a config.json."""
    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise RewardModelError(
            f"reward_model.path={path!r} is not a Hugging Face model folder (no config.json); train one with "
            "`rl-recipes rm` or point it at a sequence-classification model"
        )
    return folder


class RewardModelScorer:
    """Scores token-id sequences (`score_ids`) or prompt/response texts (`score_texts`) in batches of
    `config.batch_size`, right-padded; the model pools its own last non-pad token (transformers'
    `...ForSequenceClassification`, as TRL's reward trainer and `rl-recipes rm` train it)."""

    def __init__(self, model: Any, tokenizer: Any, config: RewardModelConfig, device: str = "cpu") -> None:
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.config = config
        self.device = device
        labels = int(getattr(model.config, "num_labels", 0))
        if labels != 1:
            raise RewardModelError(
                f"reward_model.path={config.path!r} is a classifier with num_labels={labels}; a reward model has "
                "exactly one label (a scalar score): train it with `rl-recipes rm`"
            )
        pad = getattr(model.config, "pad_token_id", None)
        if pad is None:
            pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
            if pad is None:
                raise RewardModelError(
                    f"reward_model.path={config.path!r}: neither the model config nor the tokenizer has a pad (or "
                    "eos) token, so batched scores cannot find each sequence's end; set pad_token_id in config.json"
                )
            model.config.pad_token_id = pad
        self.pad_token_id = int(pad)
        limit = config.max_length or getattr(model.config, "max_position_embeddings", None)
        self.max_length = int(limit) if limit else None

    @classmethod
    def from_config(cls, config: RewardModelConfig, device: str = "cpu") -> RewardModelScorer:
        """Load the model (float32) and its tokenizer from `config.path` onto `device`."""
        from transformers import AutoModelForSequenceClassification

        folder = check_folder(config.path)
        model = AutoModelForSequenceClassification.from_pretrained(
            str(folder), local_files_only=True, dtype=torch.float32
        )
        logger.info("reward model %s: %d parameters on %s", folder, sum(p.numel() for p in model.parameters()), device)
        return cls(model, load_reward_tokenizer(folder), config, device)

    def encode_texts(self, prompts: Sequence[str], responses: Sequence[str]) -> list[list[int]]:
        """The reward model's token ids of each `prompt + response` text (its tokenizer's special tokens added)."""
        if len(prompts) != len(responses):
            raise RewardModelError(f"got {len(prompts)} prompts for {len(responses)} responses")
        texts = [prompt + response for prompt, response in zip(prompts, responses, strict=True)]
        encoded = self.tokenizer(texts, add_special_tokens=True)["input_ids"]  # not-a-sample-field: tokenizer key
        return [list(ids) for ids in encoded]

    def score_texts(self, prompts: Sequence[str], responses: Sequence[str]) -> RewardScores:
        """Scores of `prompt + response` texts, encoded with the reward model's own tokenizer."""
        return self.score_ids(self.encode_texts(prompts, responses))

    @torch.no_grad()
    def score_ids(self, sequences: Sequence[Sequence[int]]) -> RewardScores:
        """One score per token-id sequence (prompt then response, as the reward model's vocabulary reads them)."""
        vocab = int(self.model.config.vocab_size)
        scores: list[torch.Tensor] = []
        truncated = 0
        for start in range(0, len(sequences), self.config.batch_size):
            chunk = [list(ids) for ids in sequences[start : start + self.config.batch_size]]
            for row, ids in enumerate(chunk):
                if not ids:
                    raise RewardModelError(f"sequence {start + row} is empty; a reward model scores at least one token")
                bad = [token for token in ids if not 0 <= token < vocab]
                if bad:
                    raise RewardModelError(
                        f"sequence {start + row} holds token id {bad[0]} outside the reward model's vocabulary "
                        f"(vocab_size={vocab}); set reward_model.tokenizer=retokenize"
                    )
                if self.max_length is not None and len(ids) > self.max_length:
                    chunk[row] = ids[-self.max_length :]
                    truncated += 1
            scores.append(self.forward(chunk))
        out = torch.cat(scores) if scores else torch.zeros(0)
        return RewardScores(out.to(torch.float32).cpu(), truncated)

    def forward(self, chunk: Sequence[Sequence[int]]) -> torch.Tensor:
        """`(B,)` scores of the sequences in `chunk` (one right-padded forward, gradients kept when enabled: what a
        trainer of the reward model calls, so training and scoring pad and pool alike)."""
        width = max(len(ids) for ids in chunk)
        input_ids = torch.full((len(chunk), width), self.pad_token_id, dtype=torch.int64)
        attention_mask = torch.zeros((len(chunk), width), dtype=torch.int64)
        for row, ids in enumerate(chunk):
            input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.int64)
            attention_mask[row, : len(ids)] = 1
        logits = self.model(input_ids=input_ids.to(self.device), attention_mask=attention_mask.to(self.device)).logits
        return logits[:, 0]
