"""The `tool_calling` workflow: generate, parse `<tool_call>`s, run them on a `ToolingEnv`, answer with tool
messages, until the model calls nothing, the turn limit or the token budget."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from rl_core.chat import TOOL_CHAT_TEMPLATE, Message, appended_text, encode, parse_tool_calls, render
from rl_core.tools import ToolingEnv, ToolingEnvConfig, ToolResult, make_tooling_env
from rl_core.workflows import EpisodeEngine, EpisodeInput, Trajectory, TrajectoryBuilder, register_workflow
from rl_recipes.rewards import RewardFunction, load_reward_function

logger = logging.getLogger(__name__)

TOOL_CALLING = "tool_calling"
"""Registered name of `ToolCallingWorkflow`."""


@register_workflow(TOOL_CALLING)
class ToolCallingWorkflow:
    """Multi-turn tool use over a `ToolingEnv` built per episode (`rl_core.tools.make_tooling_env`).

    The prompt is the episode's messages (`data.extras[messages_key]`, else the decoded prompt as one user turn)
    rendered with the chat template and the env's tool schemas (`tools=`). Each model turn's text is parsed for
    `<tool_call>` JSON; every call runs through `env.aexecute` (a tool's failure comes back as an error message) and
    a malformed call is answered with an error tool message saying the expected form. The episode ends when a turn
    calls no tool, stops by length, reaches `max_turns` or would pass the engine's token budget (the last two mark
    the trajectory `truncated`). With `reward`, the final answer is scored by that reward function (a registered
    name, `pkg.mod:fn` or `file.py:fn`) against `data.extras[ground_truth_key]`; without, the run's task scores it.

    Built in each rollout worker from `rollout.workflow_kwargs`; `tokenizer` is the tokenizer folder, or
    "embedded-tools" for the embedded tokenizer with the tool tokens (`build_embedded_tokenizer(tools=True)`).
    """

    def __init__(
        self,
        tokenizer: str | Any,
        *,
        tools: Sequence[str] = ("calculator",),
        tool_env: str = "local",
        tool_timeout_s: float = 10.0,
        tool_options: Mapping[str, object] | None = None,
        max_turns: int = 4,
        max_tokens_per_turn: int | None = None,
        chat_template: str | None = None,
        reward: str | None = None,
        messages_key: str = "messages",
        ground_truth_key: str = "ground_truth",
    ) -> None:
        import rl_recipes.tools  # noqa: F401  # registers the "local" and "mcp" envs and the tools

        if isinstance(tokenizer, str):
            from rl_recipes.embedded import EMBEDDED_TOOLS_TOKENIZER, build_embedded_tokenizer
            from rl_recipes.tasks import load_tokenizer

            tokenizer = (
                build_embedded_tokenizer(tools=True)
                if tokenizer == EMBEDDED_TOOLS_TOKENIZER
                else load_tokenizer(tokenizer)
            )
        if max_turns < 1:
            raise ValueError(f"rollout.workflow_kwargs.max_turns must be >= 1, got {max_turns}")
        self.tokenizer: Any = tokenizer
        self.env_config = ToolingEnvConfig(tool_env, tuple(tools), tool_timeout_s, dict(tool_options or {}))
        self.max_turns = max_turns
        self.max_tokens_per_turn = max_tokens_per_turn
        self.chat_template = chat_template or (
            None if getattr(tokenizer, "chat_template", None) else TOOL_CHAT_TEMPLATE
        )
        self.reward_fn: RewardFunction | None = load_reward_function(reward) if reward else None
        self.messages_key = messages_key
        self.ground_truth_key = ground_truth_key
        eos = getattr(tokenizer, "eos_token_id", None)
        self.stop_ids: tuple[int, ...] = (eos,) if isinstance(eos, int) else ()

    def _messages(self, data: EpisodeInput) -> list[dict[str, Any]]:
        given = data.extras.get(self.messages_key)
        if given:
            return [dict(m) for m in given]
        return [{"role": "user", "content": self.tokenizer.decode(data.prompt_ids, skip_special_tokens=True)}]

    def _render(self, messages: Sequence[Message], tools: list[dict[str, Any]], generation: bool) -> str:
        return render(
            self.tokenizer, messages, tools=tools, chat_template=self.chat_template, add_generation_prompt=generation
        )

    async def arun_episode(self, engine: EpisodeEngine, data: EpisodeInput) -> Trajectory | None:
        """One episode (see the class doc); the env is closed however the episode ends."""
        env = await make_tooling_env(self.env_config)
        try:
            return await self._episode(env, engine, data)
        finally:
            await env.aclose()

    async def _episode(self, env: ToolingEnv, engine: EpisodeEngine, data: EpisodeInput) -> Trajectory | None:
        tools = env.list_tools()
        messages = self._messages(data)
        rendered = self._render(messages, tools, generation=True)
        builder = TrajectoryBuilder(encode(self.tokenizer, rendered))
        prompt_len = len(builder.token_ids)
        calls_made = errors = 0
        truncated, answer = False, ""
        while True:
            room = engine.token_budget - (len(builder.token_ids) - prompt_len)
            if room < 1:
                truncated = True
                break
            limit = room if self.max_tokens_per_turn is None else min(room, self.max_tokens_per_turn)
            completion = await engine.agenerate(builder.token_ids, max_new_tokens=limit, stop_token_ids=self.stop_ids)
            if not completion.token_ids:
                break
            builder.add_completion(completion)
            answer = self.tokenizer.decode(completion.token_ids, skip_special_tokens=True)
            messages.append({"role": "assistant", "content": answer})
            calls = parse_tool_calls(answer)
            if not calls or completion.finish_reason != "stop":
                truncated = completion.finish_reason == "length"
                break
            if builder.num_turns >= self.max_turns:
                truncated = True
                break
            before = self._render(messages, tools, generation=False)
            for call in calls:
                result = (
                    ToolResult(call.error, is_error=True)
                    if call.error
                    else await env.aexecute(call.name, call.arguments)
                )
                calls_made += 1
                errors += result.is_error
                messages.append({"role": "tool", "content": result.content})
            after = self._render(messages, tools, generation=True)
            observation = encode(self.tokenizer, appended_text(before, after, "tool_calling workflow"))
            if len(builder.token_ids) - prompt_len + len(observation) >= engine.token_budget:
                truncated = True  # no room for the tool's answer and another model token
                break
            builder.add_observation(observation)
        if builder.num_turns == 0:
            return None
        reward = None
        if self.reward_fn is not None:
            truth = data.extras.get(self.ground_truth_key)
            reward = float(self.reward_fn(answer, "" if truth is None else str(truth)))
        metadata = {"tool_calls": calls_made, "tool_errors": errors, "messages": messages}
        return builder.build(reward=reward, truncated=truncated, metadata=metadata)
