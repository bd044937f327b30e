"""A multi-turn test workflow (loaded by file path in the tests): model turn, fixed "tool" tokens, model turn."""

from __future__ import annotations

from collections.abc import Sequence

from rl_core.workflows import EpisodeEngine, EpisodeInput, Trajectory, TrajectoryBuilder


class ToolEchoWorkflow:
    """`turns` model turns of `tokens_per_turn` tokens, `tool_ids` between them (as a tool's reply would be).

    With `own_reward` the episode scores itself (its model tokens' sum mod 5); otherwise the task scores it.
    """

    def __init__(
        self, tool_ids: Sequence[int] = (61, 62), turns: int = 2, tokens_per_turn: int = 2, own_reward: bool = True
    ) -> None:
        self.tool_ids = tuple(tool_ids)
        self.turns = turns
        self.tokens_per_turn = tokens_per_turn
        self.own_reward = own_reward

    async def arun_episode(self, engine: EpisodeEngine, data: EpisodeInput) -> Trajectory | None:
        builder = TrajectoryBuilder(data.prompt_ids)
        sampled: list[int] = []
        for turn in range(self.turns):
            completion = await engine.agenerate(builder.token_ids, max_new_tokens=self.tokens_per_turn)
            if not completion.token_ids:
                return None
            builder.add_completion(completion)
            sampled.extend(completion.token_ids)
            if turn < self.turns - 1:
                builder.add_observation(self.tool_ids)
        reward = float(sum(sampled) % 5) if self.own_reward else None
        return builder.build(reward=reward, metadata={"turns": self.turns})
