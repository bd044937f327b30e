"""Running episodes concurrently (outcomes counted, no shared state) and loading workflows by name, module or file."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from rl_core.workflows import (
    WORKFLOWS,
    Completion,
    EpisodeEngine,
    EpisodeInput,
    SingleTurnWorkflow,
    Trajectory,
    TrajectoryBuilder,
    WorkflowLoadError,
    arun_episodes,
    episode_input,
    load_workflow,
)


class FakeEpisodeEngine:
    """Test double of the runtime's engine adapter: replies `reply` after yielding to the event loop."""

    def __init__(self, reply: Sequence[int] = (5, 6), budget: int = 64) -> None:
        self.reply = tuple(reply)
        self.budget = budget
        self.calls = 0

    @property
    def token_budget(self) -> int:
        return self.budget

    async def agenerate(
        self, prompt_ids: Sequence[int], *, max_new_tokens: int | None = None, stop_token_ids: Sequence[int] = ()
    ) -> Completion:
        self.calls += 1
        await asyncio.sleep(0)
        return Completion(self.reply, (-0.5,) * len(self.reply), (3,) * len(self.reply))


class MessageListWorkflow:
    """Appends to the episode's message list across awaits, as AReaL issue 432's workflow did."""

    async def arun_episode(self, engine: EpisodeEngine, data: EpisodeInput) -> Trajectory | None:
        messages = data.extras["messages"]
        builder = TrajectoryBuilder(data.prompt_ids)
        for turn in range(3):
            messages.append({"role": "assistant", "content": f"episode {data.index} turn {turn}"})
            builder.add_completion(await engine.agenerate(builder.token_ids))
            builder.add_observation([9])
        return builder.build(metadata={"messages": list(messages)})


def test_concurrent_episodes_of_one_prompt_never_share_a_message_list() -> None:
    """Regression test for AReaL issue 432: a message list in the prompt's data leaked across episodes."""
    shared = {"messages": [{"role": "user", "content": "1 + 1"}]}
    inputs = [episode_input((1, 2), shared, index) for index in range(4)]
    engine = FakeEpisodeEngine()
    results = asyncio.run(arun_episodes(MessageListWorkflow(), lambda _: engine, inputs))
    assert [r.outcome for r in results] == ["accepted"] * 4
    for index, result in enumerate(results):
        assert result.trajectory is not None
        messages = result.trajectory.metadata["messages"]
        assert len(messages) == 4
        assert {m["content"] for m in messages[1:]} == {f"episode {index} turn {t}" for t in range(3)}
    assert shared == {"messages": [{"role": "user", "content": "1 + 1"}]}
    assert engine.calls == 12


class _Misbehaving:
    async def arun_episode(self, engine: EpisodeEngine, data: EpisodeInput) -> Trajectory | None:
        if data.index == 0:
            return None
        if data.index == 1:
            raise RuntimeError("tool server gone")
        if data.index == 2:
            return {"tokens": [1]}  # type: ignore[return-value]
        if data.index == 3:
            await asyncio.sleep(10)
        builder = TrajectoryBuilder(data.prompt_ids)
        builder.add_completion(await engine.agenerate(data.prompt_ids))
        if data.index == 4:
            builder.add_observation(range(100))
        return builder.build()


def test_each_bad_episode_is_counted_not_raised() -> None:
    inputs = [episode_input((1,), {}, index) for index in range(6)]
    results = asyncio.run(arun_episodes(_Misbehaving(), lambda _: FakeEpisodeEngine(), inputs, timeout_s=0.2))
    assert [r.outcome for r in results] == ["rejected", "failed", "malformed", "failed", "over_budget", "accepted"]
    assert "tool server gone" in results[1].error
    assert "episode_timeout_s" in results[3].error
    assert "more than the budget of 64" in results[4].error


def test_single_turn_workflow_is_one_reply_without_reward() -> None:
    result = asyncio.run(SingleTurnWorkflow().arun_episode(FakeEpisodeEngine(), EpisodeInput((1, 2, 3))))
    assert result is not None
    assert result.token_ids == (1, 2, 3, 5, 6) and result.loss_mask == (0, 0, 0, 1, 1) and result.reward is None


_FILE = """
class Echo:
    def __init__(self, turns=1):
        self.turns = turns

    async def arun_episode(self, engine, data):
        return None
"""


def test_load_workflow_by_name_module_and_file(tmp_path: Path) -> None:
    assert isinstance(load_workflow("single_turn"), SingleTurnWorkflow)
    assert "single_turn" in WORKFLOWS
    assert isinstance(load_workflow("rl_core.workflows:SingleTurnWorkflow"), SingleTurnWorkflow)
    path = tmp_path / "my_workflow.py"
    path.write_text(_FILE)
    assert load_workflow(f"{path}:Echo", {"turns": 3}).turns == 3  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("spec", "kwargs", "message"),
    [
        ("single_trun", None, "did you mean 'single_turn'"),
        ("no_such_pkg.mod:Flow", None, "module 'no_such_pkg' not found"),
        ("rl_core.workflows:Nope", None, "has no attribute 'Nope'"),
        ("rl_core.workflows:SINGLE_TURN", None, "names a str"),
        ("rl_core.workflows:Completion", None, "building it with rollout.workflow_kwargs"),
        ("single_turn", {"turns": 2}, "building it with rollout.workflow_kwargs"),
        ("rl_core.workflows:TrajectoryError", None, "without an 'async def arun_episode"),
        ("missing/file.py:Flow", None, "file 'missing/file.py' not found"),
    ],
)
def test_bad_workflow_specs_name_the_spec_and_the_fix(spec: str, kwargs: dict[str, int] | None, message: str) -> None:
    with pytest.raises(WorkflowLoadError, match=message):
        load_workflow(spec, kwargs)
