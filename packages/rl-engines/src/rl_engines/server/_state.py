"""What every route shares: the engine, the limits, and the thread pools engine calls run on."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rl_engines.rollout import EngineStateError, InferenceEngine
from rl_engines.server._config import ServerConfig
from rl_engines.server._openai_store import CompletionStore

logger = logging.getLogger(__name__)

T = TypeVar("T")

GROUP_WORKERS = 2
"""Weight-group rendezvous that may wait on their peers at once (one trainer needs one)."""


@dataclass
class ServerState:
    """The served engine plus two thread pools: engine calls block, so none runs on the event loop."""

    engine: InferenceEngine
    config: ServerConfig
    group_name: str | None = None
    """The weight-update group the engine joined through `/init_weights_update_group`, if any."""
    update_session: bool = False
    """Between `/begin_weight_update` and `/end_weight_update`."""
    session_paused: bool = False
    """The session paused generation (it was serving), so its end resumes it."""
    generate_pool: concurrent.futures.ThreadPoolExecutor = field(init=False)
    control_pool: concurrent.futures.ThreadPoolExecutor = field(init=False)
    group_pool: concurrent.futures.ThreadPoolExecutor = field(init=False)
    """Weight-group rendezvous wait on peers for up to their timeout: they get their own threads."""
    groups_joining: int = field(init=False, default=0)
    """Rendezvous now waiting for their peers (reported by `/server_info`)."""
    completions: CompletionStore = field(default_factory=CompletionStore)
    """What the OpenAI routes answered, by completion id (`/v1/rl/completions/{id}`)."""

    def __post_init__(self) -> None:
        self.generate_pool = concurrent.futures.ThreadPoolExecutor(
            self.config.generate_workers, thread_name_prefix="rollout-generate"
        )
        self.control_pool = concurrent.futures.ThreadPoolExecutor(
            self.config.control_workers, thread_name_prefix="rollout-control"
        )
        self.group_pool = concurrent.futures.ThreadPoolExecutor(GROUP_WORKERS, thread_name_prefix="rollout-group")

    async def control(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a control call (pause, update, flush, ...) on the control pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.control_pool, functools.partial(fn, *args, **kwargs))

    async def rendezvous(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a weight-group rendezvous on its own pool; refused (409) when every slot already waits on peers,
        so calls naming dead peers can never hold the control threads or queue without bound."""
        if self.groups_joining >= GROUP_WORKERS:
            raise EngineStateError(
                f"init_weights_update_group: {GROUP_WORKERS} rendezvous are already waiting for their peers; retry "
                "when one has joined or timed out (pass a smaller timeout_s to fail faster)"
            )
        self.groups_joining += 1
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self.group_pool, functools.partial(fn, *args, **kwargs))
        finally:
            self.groups_joining -= 1

    def submit_generate(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future[T]:
        """Start a generate call on the generate pool."""
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self.generate_pool, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        """Shut the engine down and stop the pools (running calls finish in the background)."""
        try:
            self.engine.shutdown()
        finally:
            self.generate_pool.shutdown(wait=False, cancel_futures=True)
            self.control_pool.shutdown(wait=False, cancel_futures=True)
            self.group_pool.shutdown(wait=False, cancel_futures=True)
