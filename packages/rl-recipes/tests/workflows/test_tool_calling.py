"""The tool_calling workflow on the embedded tokenizer, a local calculator env and a scripted engine (a test double
of the runtime's engine adapter): prompts rendered with tools=, tool output masked out of the loss, bad calls
answered with error messages, turn and token limits marked as truncation, concurrent episodes kept apart."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from rl_core.workflows import Completion, EpisodeInput, Trajectory, arun_episodes, episode_input, load_workflow
from rl_recipes.embedded import build_embedded_tokenizer
from rl_recipes.workflows import ToolCallingWorkflow

A, B = 123456789, 987654321
CALL = f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{A} * {B}"}}}}</tool_call>'
PRODUCT = str(A * B)


class ScriptedEngine:
    """Test double of the runtime's `EpisodeEngine` adapter: answers each call with the next scripted text (+ eos),
    and records the contexts it was given."""

    def __init__(self, tokenizer: Any, replies: Sequence[str], budget: int = 2048) -> None:
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.budget = budget
        self.contexts: list[tuple[int, ...]] = []

    @property
    def token_budget(self) -> int:
        return self.budget

    async def agenerate(
        self, prompt_ids: Sequence[int], *, max_new_tokens: int | None = None, stop_token_ids: Sequence[int] = ()
    ) -> Completion:
        self.contexts.append(tuple(prompt_ids))
        await asyncio.sleep(0)
        ids = [*self.tokenizer(self.replies.pop(0), add_special_tokens=False)["input_ids"], *stop_token_ids]
        finish = "stop"
        if max_new_tokens is not None and len(ids) > max_new_tokens:
            ids, finish = ids[:max_new_tokens], "length"
        return Completion(tuple(ids), (-0.1,) * len(ids), (7,) * len(ids), finish)


def exact(response_text: str, ground_truth: str) -> float:
    return float(response_text.strip() == ground_truth)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return build_embedded_tokenizer()


def _workflow(tokenizer: Any, **kwargs: Any) -> ToolCallingWorkflow:
    return ToolCallingWorkflow(tokenizer, reward=f"{__file__}:exact", **kwargs)


def _data(tokenizer: Any) -> EpisodeInput:
    question = [{"role": "user", "content": f"What is {A} * {B}?"}]
    return episode_input(tokenizer("unused")["input_ids"], {"messages": question, "ground_truth": PRODUCT}, 0)


def _run(workflow: ToolCallingWorkflow, engine: ScriptedEngine, data: EpisodeInput) -> Trajectory:
    import rl_recipes.tools  # noqa: F401  # registers the local env and the calculator

    trajectory = asyncio.run(workflow.arun_episode(engine, data))
    assert trajectory is not None
    return trajectory


def _segments(trajectory: Trajectory, tokenizer: Any) -> list[tuple[int, str]]:
    """(loss mask, text) of each run of equal mask values after the prompt."""
    out: list[tuple[int, list[int]]] = []
    for token, mask in zip(
        trajectory.token_ids[trajectory.prompt_len :], trajectory.loss_mask[trajectory.prompt_len :], strict=True
    ):
        if not out or out[-1][0] != mask:
            out.append((mask, []))
        out[-1][1].append(token)
    return [(mask, tokenizer.decode(ids)) for mask, ids in out]


def test_a_calculator_episode_masks_the_tool_answer_and_scores_the_final_answer(tokenizer: Any) -> None:
    engine = ScriptedEngine(tokenizer, [CALL, PRODUCT])
    trajectory = _run(_workflow(tokenizer), engine, _data(tokenizer))
    prompt = tokenizer.decode(trajectory.token_ids[: trajectory.prompt_len])
    assert prompt == f"Tools: calculator\nQuestion: What is {A} * {B}?\nAnswer:"
    assert _segments(trajectory, tokenizer) == [
        (1, CALL + "<eos>"),
        (0, f"<tool_response>{PRODUCT}</tool_response>\nAnswer:"),
        (1, PRODUCT + "<eos>"),
    ]
    assert trajectory.reward == 1.0 and not trajectory.truncated and trajectory.num_turns == 2
    assert trajectory.metadata["tool_calls"] == 1 and trajectory.metadata["tool_errors"] == 0
    # Each call's context is the whole conversation so far, token for token.
    assert engine.contexts[1] == trajectory.token_ids[: len(engine.contexts[1])]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ('<tool_call>{"name": "calculator", "arguments": {"expression": </tool_call>', "malformed tool call"),
        ('<tool_call>{"name": "abacus", "arguments": {}}</tool_call>', "abacus"),
        ('<tool_call>{"name": "calculator", "arguments": {"expr": "1"}}</tool_call>', "expression"),
        ('<tool_call>{"name": "calculator", "arguments": {"expression": "1/0"}}</tool_call>', "Error"),
    ],
)
def test_bad_calls_come_back_as_error_messages_and_the_episode_goes_on(tokenizer: Any, call: str, message: str) -> None:
    trajectory = _run(_workflow(tokenizer), ScriptedEngine(tokenizer, [call, "42"]), _data(tokenizer))
    segments = _segments(trajectory, tokenizer)
    assert segments[1][0] == 0 and segments[1][1].startswith("<tool_response>") and message in segments[1][1]
    assert trajectory.metadata["tool_errors"] == 1 and trajectory.num_turns == 2 and trajectory.reward == 0.0


def test_turn_limit_and_token_budget_end_the_episode_as_truncated(tokenizer: Any) -> None:
    limited = _run(_workflow(tokenizer, max_turns=2), ScriptedEngine(tokenizer, [CALL, CALL]), _data(tokenizer))
    assert limited.truncated and limited.num_turns == 2 and limited.metadata["tool_calls"] == 1
    short = _run(_workflow(tokenizer), ScriptedEngine(tokenizer, [CALL, PRODUCT], budget=120), _data(tokenizer))
    assert short.truncated and short.response_len <= 120
    cut = _run(_workflow(tokenizer), ScriptedEngine(tokenizer, [CALL], budget=20), _data(tokenizer))
    assert cut.truncated and cut.finish_reason == "length" and cut.response_len == 20


def test_concurrent_episodes_keep_their_own_conversations(tokenizer: Any) -> None:
    import rl_recipes.tools  # noqa: F401

    workflow = _workflow(tokenizer)
    shared = {"messages": [{"role": "user", "content": f"What is {A} * {B}?"}], "ground_truth": PRODUCT}
    inputs = [episode_input((1,), shared, index) for index in range(8)]
    engines = {i: ScriptedEngine(tokenizer, [CALL, PRODUCT if i % 2 else "0"]) for i in range(8)}
    results = asyncio.run(arun_episodes(workflow, engines.__getitem__, inputs))
    rewards = [r.trajectory.reward for r in results if r.trajectory is not None]
    assert rewards == [0.0, 1.0] * 4
    for result in results:
        assert result.trajectory is not None and len(result.trajectory.metadata["messages"]) == 4
    assert len(shared["messages"]) == 1


def test_the_workflow_loads_by_module_path_with_a_tokenizer_folder(tokenizer: Any, tmp_path: Path) -> None:
    tokenizer.save_pretrained(str(tmp_path))
    workflow = load_workflow("rl_recipes.workflows:ToolCallingWorkflow", {"tokenizer": str(tmp_path), "max_turns": 3})
    assert isinstance(workflow, ToolCallingWorkflow) and workflow.max_turns == 3
    assert load_workflow("tool_calling", {"tokenizer": str(tmp_path)}).max_turns == 4  # type: ignore[attr-defined]


class ScriptedInferenceEngine:
    """Test double of an `rl_engines` InferenceEngine for the runtime's workflow path: a request whose context holds
    no tool answer yet gets `CALL`, one after a tool answer gets the product; both end with eos."""

    capabilities = frozenset[str]()

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.marker = tokenizer("<tool_response>", add_special_tokens=False)["input_ids"]

    def generate(self, requests: Sequence[Any]) -> list[Any]:
        from rl_engines.rollout import GenerateOutput

        outputs = []
        for request in requests:
            ids = list(request.input_ids)
            answered = any(ids[i : i + len(self.marker)] == self.marker for i in range(len(ids)))
            text = PRODUCT if answered else CALL
            out = (*self.tokenizer(text, add_special_tokens=False)["input_ids"], self.tokenizer.eos_token_id)
            outputs.append(GenerateOutput(request.rid, out, (-0.2,) * len(out), "stop", 5, len(ids)))
        return outputs


def test_tool_calling_episodes_become_masked_batch_rows_through_the_runtime(tokenizer: Any) -> None:
    from rl_core.schema import LOSS_MASK, RESPONSE_MASK, TURN_ID
    from rl_engines.rollout import SamplingParams
    from rl_runtime.nodes import PromptItem
    from rl_runtime.nodes._trajectory_batch import WORKFLOW_REWARD_KEY
    from rl_runtime.nodes._workflow_rollout import run_workflow

    question = [{"role": "user", "content": f"What is {A} * {B}?"}]
    items = [PromptItem((1, 2), {"messages": question, "ground_truth": PRODUCT})]
    data = run_workflow(
        _workflow(tokenizer),
        ScriptedInferenceEngine(tokenizer),  # type: ignore[arg-type]
        items,
        3,
        SamplingParams(max_new_tokens=128),
        seed_parts=(0,),
        uid_of=(0, 0, 0),
        token_budget=512,
    )
    assert data.num_samples == 3 and data.metrics["rollout/engine_calls"] == 2
    assert data.extras[WORKFLOW_REWARD_KEY] == [1.0, 1.0, 1.0]
    row = 0
    length = int(data.batch["attention_mask"][row].sum())
    ids = data.batch["input_ids"][row, :length].tolist()
    mask = data.batch[LOSS_MASK][row, :length].tolist()
    assert tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m]) == CALL + "<eos>" + PRODUCT + "<eos>"
    tool = [t for t, m, turn in zip(ids, mask, data.batch[TURN_ID][row].tolist(), strict=False) if not m and turn]
    assert tokenizer.decode(tool) == f"<tool_response>{PRODUCT}</tool_response>\nAnswer:"
    assert data.batch[RESPONSE_MASK].equal(data.batch[LOSS_MASK])
