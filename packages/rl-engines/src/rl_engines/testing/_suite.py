"""`InferenceEngineConformance`: the conformance suite as a pytest test class to subclass.

    class TestMyEngine(InferenceEngineConformance):
        def make_engine(self, models):
            return MyEngine(model_path=str(models.v1_dir), initial_version=models.V1)

pytest runs one test per check. The class builds the tiny models and one engine per class (xunit-style
`setup_class`, so this module does not import pytest); checks reset the engine to v1 first. Checks for
capabilities the engine lacks are skipped with the reason.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import ClassVar

from rl_engines.rollout import InferenceEngine
from rl_engines.testing import _checks_async as aio
from rl_engines.testing import _checks_generate as gen
from rl_engines.testing import _checks_lifecycle as life
from rl_engines.testing import _checks_weights as weights
from rl_engines.testing._harness import Harness
from rl_engines.testing._models import ConformanceModels, TinyModelSpec


class InferenceEngineConformance:
    """Subclass as `Test<Engine>Conformance` and implement `make_engine`; see the module doc."""

    spec: ClassVar[TinyModelSpec] = TinyModelSpec()
    logprob_atol: ClassVar[float] = 1e-4
    """fp32 engines match a forward to ~1e-6; use ~2e-2 for bf16 on GPU."""
    tie_tol: ClassVar[float] = 1e-3
    """Greedy may diverge from the HF reference only where its top-2 logits are closer than this."""
    timeout_s: ClassVar[float] = 60.0
    _harness: ClassVar[Harness | None] = None
    _workdir: ClassVar[Path | None] = None

    def make_engine(self, models: ConformanceModels) -> InferenceEngine:
        """Start the engine under test serving `models.v1_dir`, with `initial_version=models.V1`."""
        raise NotImplementedError("implement make_engine(models) in the conformance subclass")

    @classmethod
    def setup_class(cls) -> None:
        """Build the models and start one engine for the whole class."""
        cls._workdir = Path(tempfile.mkdtemp(prefix="rl-engines-conformance-"))
        models = ConformanceModels.create(cls._workdir / "models", cls.spec)
        engine = cls().make_engine(models)
        cls._harness = Harness(engine, models, cls._workdir, cls.logprob_atol, cls.tie_tol, cls.timeout_s)

    @classmethod
    def teardown_class(cls) -> None:
        """Shut the engine down and delete the models."""
        try:
            if cls._harness is not None:
                cls._harness.engine.shutdown()
        finally:
            cls._harness = None
            if cls._workdir is not None:
                shutil.rmtree(cls._workdir, ignore_errors=True)

    @property
    def h(self) -> Harness:
        """The harness of this class (set up by `setup_class`)."""
        if self._harness is None:
            raise RuntimeError("the conformance harness is not set up; pytest calls setup_class first")
        return self._harness

    # generation
    def test_bad_input(self) -> None:
        gen.check_bad_input(self.h)

    def test_greedy_matches_reference(self) -> None:
        gen.check_greedy_matches_reference(self.h)

    def test_logprobs_match_forward(self) -> None:
        gen.check_logprobs_match_forward(self.h)

    def test_stop_token(self) -> None:
        gen.check_stop_token(self.h)

    def test_concurrent_order(self) -> None:
        gen.check_concurrent_order(self.h)

    def test_seeds(self) -> None:
        gen.check_seeds(self.h)

    # asynchronous requests
    def test_agenerate_concurrent(self) -> None:
        aio.check_agenerate_concurrent(self.h)

    def test_cancel(self) -> None:
        aio.check_cancel(self.h)

    def test_submit_errors(self) -> None:
        aio.check_submit_errors(self.h)

    # weights
    def test_transports_v1_to_v2(self) -> None:
        weights.check_transports_v1_to_v2(self.h)

    def test_partial_update(self) -> None:
        weights.check_partial_update(self.h)

    def test_repeated_shared_memory_syncs(self) -> None:
        weights.check_repeated_shared_memory_syncs(self.h)

    def test_prefix_cache_flushed(self) -> None:
        weights.check_prefix_cache_flushed(self.h)

    def test_update_errors(self) -> None:
        weights.check_update_errors(self.h)

    def test_unversioned_weights_refused(self) -> None:
        weights.check_unversioned_weights_refused(self.h)

    # lifecycle
    def test_pause_abort(self) -> None:
        life.check_pause_abort(self.h)

    def test_pause_wait(self) -> None:
        life.check_pause_wait(self.h)

    def test_pause_keep_across_update(self) -> None:
        life.check_pause_keep_across_update(self.h)

    def test_abort_rids(self) -> None:
        life.check_abort_rids(self.h)

    def test_sleep_wake(self) -> None:
        life.check_sleep_wake(self.h)
