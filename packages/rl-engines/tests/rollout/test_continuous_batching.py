"""HFEngine's continuous batching and partial rollouts: requests join a running batch, a request interrupted by a
weight update continues with the new weights from its prefix."""

from __future__ import annotations

import threading
import time

import pytest

from rl_engines.rollout import HFEngine, HFEngineConfig
from rl_engines.testing import ConformanceModels, Harness, greedy_mismatch, reference_greedy

TIE_TOL = 1e-3
THROTTLE_S = 0.003
request = Harness.request


class _Throttle:
    """An `on_tokens` that slows each step and signals once `after` tokens were made."""

    def __init__(self, after: int = 3) -> None:
        self.count, self.after, self.started = 0, after, threading.Event()

    def __call__(self, events: object) -> None:
        self.count += 1
        if self.count >= self.after:
            self.started.set()
        time.sleep(THROTTLE_S)


def test_requests_join_a_running_batch_and_finish_first(engine: HFEngine, models: ConformanceModels) -> None:
    long_prompt, short_prompt = models.prompts(2, seed=71)
    alone_short = engine.generate([request("s", short_prompt, 6)])[0]
    throttle = _Throttle()
    long = engine.submit(request("long", long_prompt, 150), on_tokens=throttle)
    assert throttle.started.wait(30)
    short = engine.submit(request("s", short_prompt, 6))
    assert short.result(60).output_ids == alone_short.output_ids
    assert not long.done(), "the short request waited for the long one"
    output = long.result(60)
    ids, margins = reference_greedy(models.v1, long_prompt, 150)
    assert greedy_mismatch(list(output.output_ids), ids, margins, TIE_TOL) is None


def test_an_interrupted_request_continues_with_the_new_weights(engine: HFEngine, models: ConformanceModels) -> None:
    prompt = models.prompts(1, seed=73)[0]
    throttle = _Throttle()
    future = engine.submit(request("partial", prompt, 40), on_tokens=throttle)
    assert throttle.started.wait(30)
    engine.pause("keep", timeout_s=30)
    engine.update_weights_from_tensors(list(models.state(models.V2).items()))
    engine.set_weight_version(models.V2)
    engine.resume()
    output = future.result(30)
    assert output.finish_reason == "length" and len(output.output_ids) == 40
    (first, second) = output.version_spans
    assert (first.version, first.start, second.version, second.end) == (models.V1, 0, models.V2, 40)
    before, after = list(output.output_ids[: second.start]), list(output.output_ids[second.start :])
    v1_ids, v1_margins = reference_greedy(models.v1, prompt, len(before))
    assert greedy_mismatch(before, v1_ids, v1_margins, TIE_TOL) is None
    # The KV cache was recomputed: what follows is v2's greedy continuation of the prompt and the v1 tokens.
    v2_ids, v2_margins = reference_greedy(models.v2, prompt + before, len(after))
    assert greedy_mismatch(after, v2_ids, v2_margins, TIE_TOL) is None
    assert engine._scheduler.recomputed_rows == 1


def test_seeded_rows_that_move_and_join_sample_what_they_sample_alone(models: ConformanceModels) -> None:
    # Budgets differ, so rows leave mid-batch: the last rows move into their places and the waiting requests join
    # into the cache's spare rows. Each seeded row still samples what it samples alone.
    engine = HFEngine.from_config(HFEngineConfig(model_path=str(models.v1_dir), max_batch_size=3))
    prompts = models.prompts(6)
    requests = [
        request(f"s{i}", prompt, budget, temperature=1.0, seed=i)
        for i, (prompt, budget) in enumerate(zip(prompts, [2, 9, 4, 7, 3, 5], strict=True))
    ]
    together = engine.generate(requests)
    alone = [engine.generate([r])[0] for r in requests]
    assert [o.output_ids for o in together] == [o.output_ids for o in alone]
    for mine, theirs in zip(together, alone, strict=True):
        assert mine.output_logprobs == pytest.approx(theirs.output_logprobs, abs=1e-5)
    engine.shutdown()
