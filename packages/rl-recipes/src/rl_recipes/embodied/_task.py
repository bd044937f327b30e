"""The embodied task seam: instructions -> token ids with the VLA's own instruction tokenizer, read from its folder
(`rl_engines.vla.instruction_encoder`: a tiny VLA's `WordTokenizer`, or an OpenVLA-OFT checkpoint's prompt)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from rl_engines.vla import InstructionEncoder, instruction_encoder
from rl_runtime.nodes import PromptItem, ResponseSample, ScoreResult

INSTRUCTION_FIELD = "instruction"
SUCCESS_EXTRA = "complete"
"""The rollout's per-episode success flag (`rl_runtime`'s embodied batch extras)."""


class EmbodiedTask:
    """Encodes env instructions for the VLA; scores an episode 1.0 when it succeeded.

    The embodied rollout calls `encode_instruction` on the instruction the env reports at reset (in BabyAI the
    mission depends on the trial's seed, so a prompt row holds only the task and trial ids).
    """

    def __init__(self, encoder: InstructionEncoder) -> None:
        self.encoder = encoder

    def encode_instruction(self, text: str) -> tuple[int, ...]:
        """The token ids of `text` for the VLA (a tiny VLA: word ids, unknown words -> `<unk>`, at most its
        `max_instruction_len`; OpenVLA-OFT: its prompt around `text`)."""
        return self.encoder.encode(text)

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
        """The instruction text of `token_ids`."""
        return self.encoder.decode(token_ids)


@attrs.frozen
class EmbodiedTaskFactory:
    """Builds the task in each worker from the VLA folder `model_dir` (the actor's `model.path`), whose kind picks
    the instruction tokenizer."""

    model_dir: str

    def __call__(self) -> EmbodiedTask:
        return EmbodiedTask(instruction_encoder(self.model_dir))
