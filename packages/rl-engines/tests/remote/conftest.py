"""Make the server tests' `_rollout_server` helper importable here; the tiny model the fleet tests serve
(`hf_config`) and their rollout-server processes (`start_servers`)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from transformers import Qwen2Config

from rl_engines.remote import LocalServer

_SERVER_TESTS = str(Path(__file__).parent.parent / "server")
if _SERVER_TESTS not in sys.path:
    sys.path.insert(0, _SERVER_TESTS)


@pytest.fixture(scope="session")
def hf_config() -> Qwen2Config:
    """A 1-layer Qwen2 of 64 tokens: the random model every fleet test's servers serve."""
    return Qwen2Config(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=64, max_position_embeddings=64,
    )  # fmt: skip


@pytest.fixture(scope="module")
def start_servers(hf_config: Qwen2Config) -> Iterator[Callable[[int], list[LocalServer]]]:
    """`start_servers(count)`: `count` rollout servers of `hf_config`, started concurrently; each is stopped when the
    module ends (resumed first if a test stopped it with SIGSTOP), wherever a test left it."""
    ready: list[LocalServer] = []

    def start(count: int) -> list[LocalServer]:
        started: list[LocalServer | BaseException] = [RuntimeError("not started")] * count

        def one(index: int) -> None:
            try:
                started[index] = LocalServer.start(hf_config)
            except BaseException as error:
                started[index] = error

        threads = [threading.Thread(target=one, args=(index,)) for index in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ready.extend(server for server in started if isinstance(server, LocalServer))
        for server in started:
            if not isinstance(server, LocalServer):
                raise server
        return [server for server in started if isinstance(server, LocalServer)]

    try:
        yield start
    finally:
        for server in ready:
            if server.process.poll() is None:
                os.kill(server.process.pid, signal.SIGCONT)
            server.stop()
