"""Conformance checks of generation: bad input, greedy vs HF, log-probs vs a forward, stop ids, order, seeds."""

from __future__ import annotations

import concurrent.futures

from rl_engines.rollout import InvalidRequestError, PromptTooLongError
from rl_engines.testing._harness import Harness, expect
from rl_engines.testing._models import V1, reference_logprobs

NEW_TOKENS = 12
THREADS = 16


def _expect_raises(error: type[BaseException], call, what: str) -> BaseException:
    try:
        call()
    except error as raised:
        return raised
    raise AssertionError(f"{what} did not raise {error.__name__}")


def check_bad_input(h: Harness) -> None:
    """health() is true; an empty list and a prompt as long as the context are typed errors; still serving."""
    h.reset()
    expect(h.engine.health(), "health() is false on a freshly reset engine")
    _expect_raises(InvalidRequestError, lambda: h.engine.generate([]), "generate([])")
    long_prompt = [1] * h.models.spec.context_len
    _expect_raises(PromptTooLongError, lambda: h.engine.generate([h.request("long", long_prompt, 4)]), "long prompt")
    prompts = h.models.prompts(2)
    h.expect_greedy(h.greedy(prompts, NEW_TOKENS), prompts, V1, "after rejected requests")


def check_greedy_matches_reference(h: Harness) -> None:
    """Batched greedy output equals HF `generate` per prompt; rids in order; "length"; version reported."""
    h.reset()
    prompts = h.models.prompts(6)
    outputs = h.greedy(prompts, NEW_TOKENS)
    expect([o.rid for o in outputs] == [f"g{i}" for i in range(6)], f"rids out of order: {[o.rid for o in outputs]}")
    for output, prompt in zip(outputs, prompts, strict=True):
        expect(output.finish_reason == "length", f"{output.rid}: finish {output.finish_reason!r}, expected 'length'")
        expect(len(output.output_ids) == NEW_TOKENS, f"{output.rid}: {len(output.output_ids)} tokens")
        expect(output.prompt_len == len(prompt), f"{output.rid}: prompt_len {output.prompt_len} != {len(prompt)}")
        expect(output.weight_version == V1, f"{output.rid}: weight_version {output.weight_version!r} != 'v1'")
        expect(all(lp <= 0 for lp in output.output_logprobs or ()), f"{output.rid}: a log-prob is positive")
    h.expect_greedy(outputs, prompts, V1, "greedy")
    expect(h.engine.weight_version() == V1, f"weight_version() is {h.engine.weight_version()!r}")


def check_logprobs_match_forward(h: Harness) -> None:
    """Reported log-probs equal a full forward's log_softmax at the chosen tokens, greedy and sampled (T=0.7)."""
    h.reset()
    prompts = h.models.prompts(3, seed=7)
    for temperature in (0.0, 0.7):
        requests = [h.request(f"t{i}", p, NEW_TOKENS, temperature=temperature, seed=i) for i, p in enumerate(prompts)]
        for output, prompt in zip(h.engine.generate(requests), prompts, strict=True):
            if output.output_logprobs is None:
                raise AssertionError(f"{output.rid}: no log-probs returned")
            scale = temperature if h.engine.logprob_mode == "temperature" else 0.0
            ref = reference_logprobs(h.models.v1, prompt, list(output.output_ids), scale)
            worst = max(abs(a - b) for a, b in zip(output.output_logprobs, ref, strict=True))
            expect(worst <= h.logprob_atol, f"T={temperature} {output.rid}: log-probs differ by {worst:.3g} > atol")


def check_stop_token(h: Harness) -> None:
    """With stop_token_ids=[X], output ends at the first X, X kept as the last token, finish "stop"."""
    h.reset()
    prompt = h.models.prompts(1, seed=11)[0]
    full = list(h.greedy([prompt], NEW_TOKENS)[0].output_ids)
    stop_at = len(full) // 2
    stop = full[stop_at]
    expected = full[: full.index(stop) + 1]
    output = h.engine.generate([h.request("s", prompt, NEW_TOKENS, stop_token_ids=(stop,))])[0]
    expect(output.finish_reason == "stop", f"finish {output.finish_reason!r}, expected 'stop'")
    expect(list(output.output_ids) == expected, f"stopped output {list(output.output_ids)} != {expected}")
    expect(len(output.output_logprobs or ()) == len(expected), "log-prob count differs from token count")


def check_concurrent_order(h: Harness) -> None:
    """16 threads generating at once each get their own rid and the same output as a lone call."""
    h.reset()
    prompts = h.models.prompts(THREADS, seed=5)
    alone = [h.greedy([p], NEW_TOKENS, prefix=f"alone{i}-")[0] for i, p in enumerate(prompts)]
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        futures = [pool.submit(h.greedy, [p], NEW_TOKENS, f"c{i}-") for i, p in enumerate(prompts)]
        together = [f.result(timeout=h.timeout_s)[0] for f in futures]
    for i, (a, b) in enumerate(zip(alone, together, strict=True)):
        expect(b.rid == f"c{i}-0", f"thread {i} got rid {b.rid!r}")
        expect(a.output_ids == b.output_ids, f"thread {i}: concurrent output {b.output_ids} != alone {a.output_ids}")


def check_seeds(h: Harness) -> None:
    """The same seed gives the same sample, alone or with batchmates; another seed gives another sample."""
    h.require("seed")
    h.reset()
    prompt, others = h.models.prompts(1, seed=3)[0], h.models.prompts(3, seed=4)

    def sample(seed: int, with_others: bool) -> tuple[int, ...]:
        mates = (
            [h.request(f"o{i}", p, NEW_TOKENS, temperature=1.0) for i, p in enumerate(others)] if with_others else []
        )
        outputs = h.engine.generate([h.request("x", prompt, NEW_TOKENS, temperature=1.0, seed=seed), *mates])
        return outputs[0].output_ids

    first = sample(42, False)
    expect(sample(42, False) == first, "the same seed gave different samples")
    expect(sample(42, True) == first, "a seeded sample changed when other requests shared the batch")
    expect(sample(43, False) != first, "seeds 42 and 43 gave the same 12-token sample")
