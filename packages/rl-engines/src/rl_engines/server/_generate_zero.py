"""`sampling_params.max_new_tokens: 0` on `/generate`: SGLang's prefill-only request (its frontend's `select` and
`cache_prefix` send it).

SGLang prefills the prompt, samples one token and cuts it: the answer has no `output_ids`, `completion_tokens` 0
and `finish_reason` `{"type": "length", "length": 0}`. The server does the same: each such request reaches the
engine with a budget of one token (so the engine still checks its prompt, its weights and its state, and every
engine keeps `max_new_tokens >= 1`), its streamed token is dropped and its output is cut to nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rl_engines.rollout import GenerateOutput, InvalidRequestError

_BUDGET = "max_new_tokens"


def _zero(sampling: Any, where: str) -> bool:
    """Whether `sampling` asks for no new tokens; a negative budget is a 400 naming the field."""
    if not isinstance(sampling, Mapping):
        return False
    budget = sampling.get(_BUDGET)
    if isinstance(budget, bool) or not isinstance(budget, int):
        return False  # the wire parser names anything else
    if budget < 0:
        raise InvalidRequestError(
            f"{where}: sampling_params.max_new_tokens must be an int >= 0 (0 = prefill only, as SGLang), got {budget}"
        )
    return budget == 0


def prefill_only(body: Mapping[str, Any]) -> tuple[Mapping[str, Any], frozenset[int]]:
    """`body` with every `max_new_tokens: 0` raised to 1, and the indices (in prompt order) of those requests."""
    samplings = body.get("sampling_params")
    ids = body.get("input_ids")  # not-a-sample-field: SGLang's HTTP field
    batch = isinstance(ids, list) and bool(ids) and isinstance(ids[0], list)
    count = len(ids) if batch and isinstance(ids, list) else 1
    if isinstance(samplings, list) and batch:
        zero = frozenset(i for i, s in enumerate(samplings) if _zero(s, f"generate[{i}]"))
        if not zero:
            return body, zero
        raised = [{**s, _BUDGET: 1} if i in zero else s for i, s in enumerate(samplings)]
        return {**body, "sampling_params": raised}, zero
    if not _zero(samplings, "generate"):
        return body, frozenset()
    assert isinstance(samplings, Mapping)
    return {**body, "sampling_params": {**samplings, _BUDGET: 1}}, frozenset(range(count))


def empty_output(output: GenerateOutput) -> GenerateOutput:
    """`output` of a prefill-only request: no tokens (nor their log-probs), finished by length unless aborted."""
    logprobs = () if output.output_logprobs is not None else None
    reason = "abort" if output.finish_reason == "abort" else "length"
    return replace(output, output_ids=(), output_logprobs=logprobs, finish_reason=reason, version_spans=())


def cut_outputs(outputs: Sequence[GenerateOutput], zero: frozenset[int]) -> list[GenerateOutput]:
    """`outputs` with each prefill-only request's output emptied."""
    return [empty_output(o) if i in zero else o for i, o in enumerate(outputs)]
