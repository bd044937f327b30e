"""The embodied task seam: instructions -> word ids with the VLA's own `WordTokenizer` (saved beside the model)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import torch

from rl_engines.vla import WordTokenizer
from rl_runtime.nodes import PromptItem, ResponseSample, ScoreResult

INSTRUCTION_FIELD = "instruction"
SUCCESS_EXTRA = "complete"
"""The rollout's per-episode success flag (`rl_runtime`'s embodied batch extras)."""


class EmbodiedTask:
    """Encodes env instructions for the VLA; scores an episode 1.0 when it succeeded.

    The embodied rollout calls `encode_instruction` on the instruction the env reports at reset (in BabyAI the
    mission depends on the trial's seed, so a prompt row holds only the task and trial ids).
    """

    def __init__(self, tokenizer: WordTokenizer, max_length: int) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length

    def encode_instruction(self, text: str) -> tuple[int, ...]:
        """The word ids of `text` (unknown words -> `<unk>`); at most `max_length` words."""
        ids, mask = self.tokenizer.encode([text], max_length=self.max_length)
        return tuple(int(i) for i in ids[0][mask[0].bool()].tolist())

    def encode(self, row: Mapping[str, Any], where: str) -> PromptItem:
        """A row that carries its instruction text as `instruction`; `where` names a row without one."""
        text = row.get(INSTRUCTION_FIELD)
        if not isinstance(text, str):
            raise ValueError(f"{where}: field {INSTRUCTION_FIELD!r} must be the instruction text, got {text!r}")
        return PromptItem(self.encode_instruction(text))

    def score(self, samples: Sequence[ResponseSample]) -> ScoreResult:
        """1.0 for an episode whose `complete` extra is true, else 0.0; the success rate as a metric."""
        scores = tuple(float(bool(sample.extras.get(SUCCESS_EXTRA, False))) for sample in samples)
        return ScoreResult(scores, {"task/success_rate": sum(scores) / max(len(scores), 1)})

    def decode(self, token_ids: Sequence[int]) -> str:
        """The instruction words of `token_ids`."""
        return self.tokenizer.decode(torch.tensor([list(token_ids)], dtype=torch.int64))[0]


@attrs.frozen
class EmbodiedTaskFactory:
    """Builds the task in each worker from the tokenizer saved in the VLA's model folder."""

    tokenizer_dir: str
    max_length: int

    def __call__(self) -> EmbodiedTask:
        return EmbodiedTask(WordTokenizer.from_pretrained(self.tokenizer_dir), self.max_length)
