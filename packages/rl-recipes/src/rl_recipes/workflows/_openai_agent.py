"""The `openai_agent` workflow: agent code written against the OpenAI SDK drives an episode on the rollout engine.

Each episode serves the worker's engine through the rollout server's own OpenAI route code
(`rl_engines.server.create_openai_app`) on an in-process ASGI transport (no port), hands an `openai.AsyncOpenAI`
client to the user's `async def agent(client, data) -> float | None`, and turns the completions the agent asked for
into one `Trajectory`: the model's tokens in the loss (mask 1), everything the agent added between turns (tool
results, user messages) out of it (mask 0).

A chat request that extends the previous turn (its messages start with the previous request's messages plus the
assistant message answered) gets as context the previous turn's exact tokens plus the rendered new messages, so the
trajectory is the token sequence the model actually saw (`/v1/completions` requests extend it when their token-id
prompt starts with the previous turn's tokens). A request that does not extend the previous turn (the agent rewrote
or dropped history, started a second conversation, made calls concurrently) is still answered, but the episode is
rejected (None, counted by the runtime as "rejected") with the reason logged: one episode is one linear
conversation.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from rl_core import import_from_spec
from rl_core.chat import appended_text
from rl_core.workflows import (
    Completion,
    EpisodeEngine,
    EpisodeInput,
    Trajectory,
    TrajectoryBuilder,
    TrajectoryError,
    WorkflowLoadError,
    register_workflow,
)

if TYPE_CHECKING:  # the server modules need fastapi (rl-engines[server]): imported when an episode runs
    from rl_engines.rollout import SamplingParams
    from rl_engines.server import CompletionRecord, CompletionStore, OpenAIService

logger = logging.getLogger(__name__)

OPENAI_AGENT = "openai_agent"
"""Registered name of `OpenAIAgentWorkflow`."""
EPISODE_BASE_URL = "http://episode.local/v1"
"""The in-process endpoint's address as the agent's client sees it (nothing listens there: ASGI transport)."""
_AGENT_FORMS = "'pkg.mod:fn' or 'path/to/file.py:fn'"

Agent = Callable[[Any, EpisodeInput], Awaitable[float | None]]
"""`async def agent(client: openai.AsyncOpenAI, data: EpisodeInput) -> float | None` (None: the task scores it)."""


class _EpisodeBackend:
    """One episode's engine as an `OpenAIBackend`: one choice per request, the episode's token budget as the
    context limit. The run's sampling settings apply (temperature, top-p, seeds): the request's are not used."""

    def __init__(self, engine: EpisodeEngine, store: CompletionStore) -> None:
        self.engine = engine
        self.store = store

    def room(self, prompt_ids: Sequence[int]) -> int | None:
        records = self.store.records()
        first = len(records[0].prompt_ids) if records else len(prompt_ids)
        return self.engine.token_budget - (len(prompt_ids) - first)

    async def agenerate(
        self, rid: str, prompt_ids: tuple[int, ...], sampling: SamplingParams, n: int
    ) -> list[Completion]:
        if n != 1:
            from rl_engines.server import OpenAIError

            raise OpenAIError(f"n={n}: an episode is one conversation, so the openai_agent workflow takes n=1", "n")
        completion = await self.engine.agenerate(
            prompt_ids, max_new_tokens=sampling.max_new_tokens, stop_token_ids=sampling.stop_token_ids
        )
        return [completion]


def _extended_prompt(
    service: OpenAIService, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
) -> tuple[int, ...]:
    """The context of a chat request: the previous turn's tokens plus the new messages when the request extends the
    previous turn, else the whole conversation rendered afresh (the episode will be rejected)."""
    records = service.store.records()
    fresh = service.encode(service.render(messages, tools, generation=True))
    if not records or not records[-1].messages:
        return fresh
    last = records[-1]
    history = [*last.messages, last.replies[0]]
    if len(messages) <= len(history) or list(messages[: len(history)]) != history:
        return fresh
    try:
        added = appended_text(
            service.render(history, tools, generation=False),
            service.render(messages, tools, generation=True),
            "openai_agent workflow",
        )
    except ValueError:
        return fresh
    return (*last.prompt_ids, *last.choices[0].token_ids, *service.encode(added))


def trajectory_of(records: Sequence[CompletionRecord], reward: float | None) -> Trajectory | str:
    """The episode of `records` (oldest first) as a `Trajectory`, or why it cannot be one."""
    if not records:
        return "the agent made no completion request"
    builder = TrajectoryBuilder(records[0].prompt_ids)
    for k, record in enumerate(records):
        if len(record.choices) != 1:
            return f"completion {record.id} has {len(record.choices)} choices; an episode takes n=1"
        if k:
            context = builder.token_ids
            if record.prompt_ids[: len(context)] != context or len(record.prompt_ids) == len(context):
                return (
                    f"request {k + 1} ({record.id}) does not extend the conversation of request {k}: send the "
                    "previous messages and the assistant's reply unchanged, one request at a time"
                )
            builder.add_observation(record.prompt_ids[len(context) :])
        builder.add_completion(record.choices[0])
    last = records[-1].choices[0]
    try:
        return builder.build(
            reward=reward,
            truncated=last.finish_reason == "length",
            metadata={"completion_ids": [r.id for r in records]},
        )
    except TrajectoryError as exc:
        return str(exc)


@register_workflow(OPENAI_AGENT)
class OpenAIAgentWorkflow:
    """Runs `agent` (a spec, see the module doc) once per episode against the rollout engine behind an in-process
    OpenAI endpoint. Built in each rollout worker from `rollout.workflow_kwargs` (`tokenizer` folder, `agent`)."""

    def __init__(
        self, tokenizer: str | Any, *, agent: str | Agent, chat_template: str | None = None, api_key: str = "episode"
    ) -> None:
        try:  # checked here so a missing package fails when the workflow is built, naming the fix
            import openai  # noqa: F401

            import rl_engines.server  # noqa: F401
        except ImportError as exc:
            raise WorkflowLoadError(
                f"rollout.workflow=openai_agent needs the openai package and rl-engines[server] ({exc}): "
                "pip install 'rl-recipes[openai]'"
            ) from exc
        if isinstance(tokenizer, str):
            from rl_recipes.tasks import load_tokenizer

            tokenizer = load_tokenizer(tokenizer)
        fn = (
            import_from_spec(agent, what="agent", forms=_AGENT_FORMS, error=WorkflowLoadError)
            if isinstance(agent, str)
            else agent
        )
        if not inspect.iscoroutinefunction(fn):
            raise WorkflowLoadError(
                f"rollout.workflow_kwargs.agent={agent!r} is not an 'async def agent(client, data)'; point it at a "
                "coroutine function"
            )
        self.tokenizer: Any = tokenizer
        self.agent: Agent = fn
        self.chat_template = chat_template
        self.api_key = api_key

    async def arun_episode(self, engine: EpisodeEngine, data: EpisodeInput) -> Trajectory | None:
        """The agent's episode as a Trajectory; None (rejected, logged) when its calls are not one conversation."""
        import httpx
        import openai

        from rl_engines.server import CompletionStore, OpenAIService, create_openai_app

        store = CompletionStore()
        service = OpenAIService(
            self.tokenizer,
            _EpisodeBackend(engine, store),
            chat_template=self.chat_template,
            store=store,
            chat_prompt=_extended_prompt,
        )
        app = create_openai_app(service)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=EPISODE_BASE_URL) as http:
            # openai>=3 annotates httpx2's client; it drives an httpx one (the ASGI transport) the same way.
            client = openai.AsyncOpenAI(
                api_key=self.api_key,
                base_url=EPISODE_BASE_URL,
                http_client=http,  # pyright: ignore[reportArgumentType]
            )
            reward = await self.agent(client, data)
        result = trajectory_of(store.records(), None if reward is None else float(reward))
        if isinstance(result, str):
            logger.warning("openai_agent episode %d rejected: %s", data.index, result)
            return None
        return result
