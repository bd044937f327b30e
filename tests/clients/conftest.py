"""Real SGLang clients against our rollout server: sglang's, AReaL's and verl's HTTP client code.

They run in `nox -s conformance`, a virtualenv holding sglang 0.5.23, AReaL 1.0.4 and verl 0.9.1 installed with
`--no-deps` plus the modules they import; there `RL_CLIENTS_REQUIRED=1` turns a client that fails to import into
a failure instead of a skip. Each remaining failure is an `xfail` whose reason names it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

for _path in (Path(__file__).parent, Path(__file__).parents[2] / "packages" / "rl-engines" / "tests" / "server"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from _char_tokenizer import save_char_tokenizer  # noqa: E402
from _clients import API_KEY  # noqa: E402
from _rollout_server import ServerProcess  # noqa: E402

from rl_engines.testing import ConformanceModels  # noqa: E402


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> ConformanceModels:
    clients = ("sglang", "areal", "verl")
    if os.environ.get("RL_CLIENTS_REQUIRED") != "1" and not any(importlib.util.find_spec(c) for c in clients):
        pytest.skip("no SGLang client is installed here (run `nox -s conformance`)")  # before any server starts
    return ConformanceModels.create(tmp_path_factory.mktemp("client-models"))


@pytest.fixture(scope="session")
def server(models: ConformanceModels) -> Iterator[ServerProcess]:
    """Our server with `--api-key` and a tokenizer (sglang's frontend sends `text`), for the clients that send a
    key."""
    tokenizer = save_char_tokenizer(models.root / "tokenizer", models.spec.vocab_size)
    process = ServerProcess(str(models.v1_dir), "--api-key", API_KEY, "--tokenizer", str(tokenizer))
    yield process
    process.stop()


@pytest.fixture(scope="session")
def open_server(models: ConformanceModels) -> Iterator[ServerProcess]:
    """Our server without a key (127.0.0.1 only), for the adapters that never send one: sglang's
    `HttpServerEngineAdapter` and verl's adapters put the key only on their launch-time health probe."""
    process = ServerProcess(str(models.v1_dir))
    yield process
    process.stop()
