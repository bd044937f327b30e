"""Make `_rollout_server` importable by the server and remote tests; the in-process server on the conformance model
and a character tokenizer (`engine`, `client`) that the `/generate` extension tests share."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


from _char_tokenizer import char_tokenizer  # noqa: E402  (importable once _HERE is on sys.path)
from fastapi.testclient import TestClient  # noqa: E402

from rl_engines.rollout import HFEngine, HFEngineConfig  # noqa: E402
from rl_engines.server import ServerConfig, build_hf_engine, create_app  # noqa: E402
from rl_engines.testing import ConformanceModels  # noqa: E402


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HFEngine]:
    """An HF engine on the 128-token conformance model, one per test module."""
    models = ConformanceModels.create(tmp_path_factory.mktemp("models"))
    engine = build_hf_engine(str(models.v1_dir), HFEngineConfig(initial_version=1))
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def client(engine: HFEngine) -> Iterator[TestClient]:
    """The server app on `engine` with a character tokenizer, in process."""
    app = create_app(engine, ServerConfig(), tokenizer=char_tokenizer(), owns_engine=False)
    with TestClient(app) as test_client:
        yield test_client
