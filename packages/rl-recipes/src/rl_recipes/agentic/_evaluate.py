"""Held-out evaluation in the driver: the `tool_calling` workflow run greedily on a Hugging Face model folder, one
episode after another, each scored like training scores it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rl_core.workflows import Completion, EpisodeInput, Trajectory
from rl_recipes.agentic._task import GROUND_TRUTH_KEY, AgenticTask, score_transcript
from rl_recipes.agentic._warm_start import torch_threads
from rl_recipes.workflows import ToolCallingWorkflow, parse_tool_calls

FAILURE_KINDS: tuple[str, ...] = ("right", "no_call", "malformed_call", "wrong_call", "no_answer", "result_not_stated")
"""How a held-out episode ended (`failure_kind`): right; no tool call; a call that did not parse; a call whose last
result is not the answer (wrong operands, or the tool answered with an error); no answer after the tool's result
(turn or token limit); the tool's result was the answer but the final answer differs from it."""


class GreedyEngine:
    """An `EpisodeEngine` over an in-process causal LM: greedy decoding, version 0, `token_budget` tokens an
    episode may add after its prompt."""

    def __init__(self, model: Any, token_budget: int, max_new_tokens: int) -> None:
        self.model = model
        self._budget = token_budget
        self.max_new_tokens = max_new_tokens

    @property
    def token_budget(self) -> int:
        """Tokens an episode may add after its first prompt."""
        return self._budget

    async def agenerate(
        self, prompt_ids: Sequence[int], *, max_new_tokens: int | None = None, stop_token_ids: Sequence[int] = ()
    ) -> Completion:
        """The greedy continuation of `prompt_ids`, stopping after a stop token or `max_new_tokens`."""
        limit = min(self.max_new_tokens, max_new_tokens or self.max_new_tokens)
        ids = torch.tensor([list(prompt_ids)], dtype=torch.int64)
        stops = set(stop_token_ids)
        with torch.no_grad():
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=limit,
                do_sample=False,
                eos_token_id=sorted(stops) or None,
                pad_token_id=self.model.generation_config.pad_token_id,
                output_scores=True,
                return_dict_in_generate=True,
            )
        new = out.sequences[0, ids.shape[1] :].tolist()
        scores = out.scores[: len(new)]
        log_probs = [
            float(torch.log_softmax(score[0].float(), dim=-1)[token]) for score, token in zip(scores, new, strict=True)
        ]
        if stops and any(token in stops for token in new):  # cut anything generated after the first stop token
            cut = next(i for i, token in enumerate(new) if token in stops) + 1
            new, log_probs = new[:cut], log_probs[:cut]
        finish = "stop" if new and new[-1] in stops else "length"
        return Completion(tuple(new), tuple(log_probs), (0,) * len(new), finish)


@dataclass(frozen=True)
class EpisodeReport:
    """One held-out episode: the conversation and how it scored."""

    messages: tuple[Mapping[str, Any], ...]
    ground_truth: str
    success: bool
    called_tool: bool


@dataclass(frozen=True)
class Evaluation:
    """Held-out results of one model: every episode, and the rates over them."""

    episodes: tuple[EpisodeReport, ...]

    @property
    def success_rate(self) -> float:
        """Share of episodes answered right."""
        return sum(e.success for e in self.episodes) / max(1, len(self.episodes))

    @property
    def tool_call_rate(self) -> float:
        """Share of episodes with at least one tool call."""
        return sum(e.called_tool for e in self.episodes) / max(1, len(self.episodes))

    def outcomes(self) -> dict[str, int]:
        """Episodes of each `FAILURE_KINDS` entry (every kind listed, 0 included)."""
        counts = dict.fromkeys(FAILURE_KINDS, 0)
        for episode in self.episodes:
            counts[failure_kind(episode)] += 1
        return counts


def failure_kind(episode: EpisodeReport) -> str:
    """Where `episode` went wrong, one of `FAILURE_KINDS` (checked in that order)."""
    if episode.success:
        return "right"
    roles = [str(m.get("role", "")) for m in episode.messages]
    calls = [
        call
        for m, role in zip(episode.messages, roles, strict=True)
        if role == "assistant"
        for call in parse_tool_calls(str(m.get("content", "")))
    ]
    if not calls:
        return "no_call"
    if any(call.error for call in calls):
        return "malformed_call"
    results = [
        str(m.get("content", "")).strip() for m, role in zip(episode.messages, roles, strict=True) if role == "tool"
    ]
    if not results or results[-1] != episode.ground_truth.strip():
        return "wrong_call"
    if roles[-1] != "assistant":
        return "no_answer"
    return "result_not_stated"


def _report(task: AgenticTask, trajectory: Trajectory | None, truth: str, messages: Any) -> EpisodeReport:
    if trajectory is None:
        return EpisodeReport(tuple(messages), truth, False, False)
    transcript = task.decode(trajectory.token_ids[trajectory.prompt_len :])
    reward, called, _ = score_transcript(transcript, truth)
    return EpisodeReport(tuple(trajectory.metadata.get("messages", messages)), truth, reward > 0, called)


def evaluate_model(
    model_dir: Path,
    task: AgenticTask,
    rows: Sequence[Mapping[str, Any]],
    workflow_kwargs: Mapping[str, Any],
    *,
    token_budget: int,
    max_new_tokens: int,
) -> Evaluation:
    """Greedy `tool_calling` episodes of the model in `model_dir` on `rows` (`workflow_kwargs` as in the run's
    `rollout.workflow_kwargs`), each scored by `task`."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
    workflow = ToolCallingWorkflow(**{**dict(workflow_kwargs), "tokenizer": task.tokenizer})
    engine = GreedyEngine(model, token_budget, max_new_tokens)

    async def play() -> list[EpisodeReport]:
        reports = []
        for index, row in enumerate(rows):
            item = task.encode(row, f"held-out row {index}")
            trajectory = await workflow.arun_episode(engine, EpisodeInput(item.prompt_ids, dict(item.extras), index))
            reports.append(_report(task, trajectory, str(item.extras[GROUND_TRUTH_KEY]), item.extras["messages"]))
        return reports

    with torch_threads(1):
        return Evaluation(tuple(asyncio.run(play())))
