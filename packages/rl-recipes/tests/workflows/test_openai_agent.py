"""The openai_agent workflow: an agent on the real `openai` client drives a scripted episode engine through the
server's OpenAI routes; its completions become one Trajectory whose loss mask covers the model's tokens only, and a
conversation that does not extend the previous turn rejects the episode."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from rl_core.workflows import Completion, EpisodeInput, Trajectory, arun_episodes, episode_input, load_workflow
from rl_recipes.embedded import build_embedded_tokenizer
from rl_recipes.workflows import OpenAIAgentWorkflow

A, B = 123456789, 987654321
PRODUCT = str(A * B)
CALL = f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{A} * {B}"}}}}</tool_call>'
CALCULATOR: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
    },
}


class ScriptedEngine:
    """Test double of the runtime's `EpisodeEngine`: each call answers the next scripted text plus the stop token,
    and records the context it was given."""

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
        ids = [*self.tokenizer(self.replies.pop(0), add_special_tokens=False)["input_ids"], *stop_token_ids]
        return Completion(tuple(ids), (-0.25,) * len(ids), (4,) * len(ids), "stop")


async def calculator_agent(client: Any, data: EpisodeInput) -> float:
    """Asks the question, runs the calculator call the model makes, and scores the final answer."""
    messages: list[Any] = [{"role": "user", "content": data.extras["question"]}]
    first = await client.chat.completions.create(model="policy", messages=messages, tools=[CALCULATOR])
    reply = first.choices[0].message
    messages.append(reply.model_dump(exclude_none=True))
    for call in reply.tool_calls or []:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": PRODUCT})
    final = await client.chat.completions.create(model="policy", messages=messages, tools=[CALCULATOR])
    return float((final.choices[0].message.content or "").strip() == data.extras["ground_truth"])


async def forgetful_agent(client: Any, data: EpisodeInput) -> float:
    """Sends the second request without the first exchange: not one conversation."""
    question = [{"role": "user", "content": data.extras["question"]}]
    await client.chat.completions.create(model="policy", messages=question)
    await client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "And 1 + 1?"}])
    return 1.0


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return build_embedded_tokenizer()


def _data(index: int = 0) -> EpisodeInput:
    return episode_input((1,), {"question": f"What is {A} * {B}?", "ground_truth": PRODUCT}, index)


def _segments(trajectory: Trajectory, tokenizer: Any) -> list[tuple[int, str]]:
    out: list[tuple[int, list[int]]] = []
    start = trajectory.prompt_len
    for token, mask in zip(trajectory.token_ids[start:], trajectory.loss_mask[start:], strict=True):
        if not out or out[-1][0] != mask:
            out.append((mask, []))
        out[-1][1].append(token)
    return [(mask, tokenizer.decode(ids)) for mask, ids in out]


def test_an_agent_episode_becomes_one_trajectory_masking_what_the_agent_added(tokenizer: Any) -> None:
    workflow = load_workflow("openai_agent", {"tokenizer": tokenizer, "agent": f"{__file__}:calculator_agent"})
    engine = ScriptedEngine(tokenizer, [CALL, PRODUCT])
    trajectory = asyncio.run(workflow.arun_episode(engine, _data()))

    assert trajectory is not None and trajectory.reward == 1.0 and trajectory.num_turns == 2
    prompt = tokenizer.decode(trajectory.token_ids[: trajectory.prompt_len])
    assert prompt == f"Tools: calculator\nQuestion: What is {A} * {B}?\nAnswer:"
    assert _segments(trajectory, tokenizer) == [
        (1, CALL + "<eos>"),
        (0, f"<tool_response>{PRODUCT}</tool_response>\nAnswer:"),
        (1, PRODUCT + "<eos>"),
    ]
    model = [i for i, m in enumerate(trajectory.loss_mask) if m]
    assert {trajectory.log_probs[i] for i in model} == {-0.25} and {trajectory.versions[i] for i in model} == {4}
    assert all(trajectory.log_probs[i] == 0.0 for i, m in enumerate(trajectory.loss_mask) if not m)
    # The second call's context is the first turn's exact tokens plus the tool answer: what training sees.
    assert engine.contexts[1] == trajectory.token_ids[: len(engine.contexts[1])]
    assert len(trajectory.metadata["completion_ids"]) == 2


def test_a_conversation_that_does_not_extend_the_last_turn_is_rejected(tokenizer: Any) -> None:
    workflow = OpenAIAgentWorkflow(tokenizer, agent=forgetful_agent)
    results = asyncio.run(
        arun_episodes(workflow, lambda _: ScriptedEngine(tokenizer, ["4", "2"]), [_data(0), _data(1)])
    )
    assert [r.outcome for r in results] == ["rejected", "rejected"]


def test_concurrent_episodes_keep_their_own_records(tokenizer: Any) -> None:
    workflow = OpenAIAgentWorkflow(tokenizer, agent=calculator_agent)
    engines = {i: ScriptedEngine(tokenizer, [CALL, PRODUCT if i % 2 else "0"]) for i in range(4)}
    results = asyncio.run(arun_episodes(workflow, engines.__getitem__, [_data(i) for i in range(4)]))
    assert [r.trajectory.reward if r.trajectory else None for r in results] == [0.0, 1.0, 0.0, 1.0]


def test_bad_agent_specs_fail_at_load_naming_the_fix(tokenizer: Any) -> None:
    with pytest.raises(ValueError, match="async def agent"):
        load_workflow("openai_agent", {"tokenizer": tokenizer, "agent": f"{__file__}:_data"})
    with pytest.raises(ValueError, match="no attribute 'nope'"):
        load_workflow("openai_agent", {"tokenizer": tokenizer, "agent": f"{__file__}:nope"})
