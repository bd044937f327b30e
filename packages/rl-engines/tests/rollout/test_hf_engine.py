"""HFEngine generation against plain transformers, its rejections, streaming, caching and lifecycle."""

from __future__ import annotations

import pytest
import torch

from rl_engines.rollout import (
    EngineShutdownError,
    EngineTimeoutError,
    GenerateRequest,
    HFEngine,
    HFEngineConfig,
    InvalidRequestError,
    PromptTooLongError,
    SamplingParams,
)
from rl_engines.testing import ConformanceModels, Harness, greedy_mismatch, reference_greedy, reference_logprobs

TIE_TOL = 1e-3
request = Harness.request


def _greedy(engine: HFEngine, prompts: list[list[int]], n: int) -> list:
    return engine.generate([request(f"r{i}", p, n) for i, p in enumerate(prompts)])


def test_left_padded_batch_matches_transformers_per_prompt(engine: HFEngine, models: ConformanceModels) -> None:
    prompts = models.prompts(5, min_len=1, max_len=20)
    for output, prompt in zip(_greedy(engine, prompts, 16), prompts, strict=True):
        ids, margins = reference_greedy(models.v1, prompt, 16)
        assert greedy_mismatch(list(output.output_ids), ids, margins, TIE_TOL) is None
        reference = reference_logprobs(models.v1, prompt, list(output.output_ids), 0.0)
        torch.testing.assert_close(torch.tensor(output.output_logprobs), torch.tensor(reference), atol=1e-5, rtol=0)
        assert output.finish_reason == "length" and output.prompt_len == len(prompt)


def test_sampled_logprobs_are_temperature_scaled(engine: HFEngine, models: ConformanceModels) -> None:
    prompt = models.prompts(1)[0]
    output = engine.generate([request("s", prompt, 12, temperature=1.3, top_k=10, seed=5)])[0]
    reference = reference_logprobs(models.v1, prompt, list(output.output_ids), 1.3)
    torch.testing.assert_close(torch.tensor(output.output_logprobs), torch.tensor(reference), atol=1e-5, rtol=0)


def test_batch_splitting_does_not_change_outputs(models: ConformanceModels) -> None:
    prompts = models.prompts(5)
    small = HFEngine.from_config(HFEngineConfig(model_path=str(models.v1_dir), max_batch_size=2))
    big = HFEngine.from_config(HFEngineConfig(model_path=str(models.v1_dir)))
    assert [o.output_ids for o in _greedy(small, prompts, 8)] == [o.output_ids for o in _greedy(big, prompts, 8)]


def test_eos_stops_unless_ignored(models: ConformanceModels) -> None:
    prompt = models.prompts(1, seed=9)[0]
    full, _ = reference_greedy(models.v1, prompt, 12)
    eos = full[5]
    engine = HFEngine.from_config(HFEngineConfig(model_path=str(models.v1_dir), eos_token_ids=(eos,)))
    stopped = engine.generate([request("e", prompt, 12, ignore_eos=False)])[0]
    assert stopped.finish_reason == "stop" and list(stopped.output_ids) == full[: full.index(eos) + 1]
    ignored = engine.generate([request("i", prompt, 12, ignore_eos=True)])[0]
    assert ignored.finish_reason == "length" and list(ignored.output_ids) == full


def test_generation_stops_at_the_context_end(engine: HFEngine, models: ConformanceModels) -> None:
    prompt = [3] * (models.spec.context_len - 3)
    output = engine.generate([request("c", prompt, 10)])[0]
    assert output.finish_reason == "length" and len(output.output_ids) == 3


def test_rejected_requests_leave_the_engine_serving(engine: HFEngine, models: ConformanceModels) -> None:
    context = models.spec.context_len
    with pytest.raises(InvalidRequestError, match="empty request list"):
        engine.generate([])
    with pytest.raises(PromptTooLongError, match=f"the context holds {context} tokens"):
        engine.generate([request("long", [1] * context, 1)])
    with pytest.raises(InvalidRequestError, match="outside the vocabulary of 128"):
        engine.generate([request("oov", [1, 128], 1)])
    with pytest.raises(InvalidRequestError, match="appears twice"):
        engine.generate([request("d", [1], 1), request("d", [2], 1)])
    assert engine.health() and engine.status().in_flight == 0
    assert _greedy(engine, [[1, 2, 3]], 3)[0].finish_reason == "length"


def test_streaming_reports_every_token_in_order(engine: HFEngine, models: ConformanceModels) -> None:
    events: list[tuple[str, int, float]] = []
    outputs = engine.generate(
        [request("a", [1, 2], 5), request("b", [4], 3, stop_token_ids=())], on_tokens=events.extend
    )
    for output in outputs:
        mine = [(t, lp) for rid, t, lp in events if rid == output.rid]
        assert mine == list(zip(output.output_ids, output.output_logprobs, strict=True))


def test_logprobs_can_be_omitted(engine: HFEngine) -> None:
    plain = GenerateRequest("p", (1, 2), SamplingParams(max_new_tokens=2, temperature=0.0), return_logprobs=False)
    assert engine.generate([plain])[0].output_logprobs is None


def test_prefill_cache_hits_and_is_dropped_on_flush_and_update(engine: HFEngine, models: ConformanceModels) -> None:
    prompts = models.prompts(2)
    first = _greedy(engine, prompts, 6)
    assert engine.prefill_cache_entries == 1
    assert [o.output_ids for o in _greedy(engine, prompts, 6)] == [o.output_ids for o in first]
    assert engine._cache.hits == 1
    engine.flush_cache()
    assert engine.prefill_cache_entries == 0
    _greedy(engine, prompts, 6)
    engine.update_weights_from_tensors([("model.norm.weight", models.state(1)["model.norm.weight"])])
    assert engine.prefill_cache_entries == 0


def test_seeded_sampling_is_reproducible_and_unseeded_uses_the_engine_seed(models: ConformanceModels) -> None:
    def run(seed_config: int) -> tuple:
        engine = HFEngine.from_config(HFEngineConfig(model_path=str(models.v1_dir), seed=seed_config))
        return tuple(o.output_ids for o in engine.generate([request("u", [5, 6], 8, temperature=1.0)]))

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_pause_blocks_admission_until_timeout(engine: HFEngine) -> None:
    fast = HFEngine(engine.model, HFEngineConfig(admission_timeout_s=0.2))
    fast.pause("wait")
    assert fast.status().state == "paused"
    with pytest.raises(EngineTimeoutError, match=r"paused \(mode 'wait'\); call resume\(\)"):
        fast.generate([request("p", [1], 1)])
    fast.resume()
    assert fast.generate([request("p", [1], 1)])[0].finish_reason == "length"


def test_shutdown_refuses_further_calls(engine: HFEngine) -> None:
    engine.shutdown()
    engine.shutdown()
    assert not engine.health() and engine.status().state == "stopped"
    with pytest.raises(EngineShutdownError, match="shut down"):
        engine.generate([request("x", [1], 1)])
    with pytest.raises(EngineShutdownError, match="shut down"):
        engine.pause()


def test_bfloat16_engine_generates(models: ConformanceModels) -> None:
    engine = HFEngine.from_config(HFEngineConfig(model_path=str(models.v1_dir), dtype="bfloat16"))
    assert engine.model.model.embed_tokens.weight.dtype == torch.bfloat16
    output = engine.generate([request("b", [1, 2, 3], 4)])[0]
    assert len(output.output_ids) == 4 and all(lp <= 0 for lp in output.output_logprobs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dtype": "float8"}, "dtype must be one of"),
        ({"device": "tpu"}, "device must be 'cpu'"),
        ({"context_len": 1}, "context_len must be >= 2"),
        ({"max_batch_size": 0}, "max_batch_size must be >= 1"),
        ({"prefill_cache_size": -1}, "prefill_cache_size must be >= 0"),
        ({"admission_timeout_s": 0}, "admission_timeout_s must be > 0"),
        ({"drain_timeout_s": -1}, "drain_timeout_s must be > 0"),
        ({"initial_version": "0"}, r"initial_version must be a weight version, an int >= 0.*convert it with int"),
        ({"initial_version": -1}, "initial_version must be a weight version, an int >= 0"),
    ],
)
def test_config_rejects(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidRequestError, match=match):
        HFEngineConfig(**kwargs)


def test_from_config_needs_a_model_path() -> None:
    with pytest.raises(InvalidRequestError, match="model_path is None"):
        HFEngine.from_config(HFEngineConfig())


def test_abort_by_rid_reaches_a_later_batch_of_the_same_call(models: ConformanceModels) -> None:
    engine = HFEngine.from_config(HFEngineConfig(model_path=str(models.v1_dir), max_batch_size=1))
    first = True

    def abort_second(events: object) -> None:
        nonlocal first
        if first:
            engine.abort(["second"])
            first = False

    outputs = engine.generate([request("first", [1, 2], 4), request("second", [3], 4)], on_tokens=abort_second)
    assert [(o.finish_reason, len(o.output_ids)) for o in outputs] == [("length", 4), ("abort", 0)]
    assert outputs[1].weight_version == 0


def test_rows_that_retire_leave_the_others_their_own_stops_and_budgets(
    engine: HFEngine, models: ConformanceModels
) -> None:
    # Rows with different stop ids and budgets in one batch: each retirement keeps the survivors' stop rules (the
    # running batch indexes its per-row tables), so every row ends where it ends generated alone.
    prompts = models.prompts(4, min_len=2, max_len=12)
    alone = [_greedy(engine, [prompt], 10)[0].output_ids for prompt in prompts]
    requests = [
        request("a", prompts[0], 10, stop_token_ids=(alone[0][4],)),
        request("b", prompts[1], 2, stop_token_ids=()),
        request("c", prompts[2], 10, stop_token_ids=(alone[2][6],)),
        request("d", prompts[3], 7, stop_token_ids=()),
    ]
    outputs = {output.rid: output for output in engine.generate(requests)}
    for rid, full, stop_at in (("a", alone[0], 4), ("c", alone[2], 6)):
        end = full.index(full[stop_at]) + 1  # the first time the stop token comes
        assert outputs[rid].output_ids == full[:end] and outputs[rid].finish_reason == "stop", rid
    assert outputs["b"].output_ids == alone[1][:2] and outputs["b"].finish_reason == "length"
    assert outputs["d"].output_ids == alone[3][:7] and outputs["d"].finish_reason == "length"
