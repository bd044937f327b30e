"""Prompt log-probs on `/generate` (SGLang's `logprob_start_len` and `top_logprobs_num`).

With `return_logprob: true`, `logprob_start_len >= 0` adds `meta_info.input_token_logprobs`: one
`[logprob, token_id, text|None]` per prompt position from that index, the logprob of that prompt token given the
tokens before it (None at position 0, which has no context, as SGLang). `-1` (the default) means output log-probs
only (the input keys are left out, where SGLang reports the last prompt token); an index at or past the prompt's
length is a 400 naming the field and the length. `top_logprobs_num = k > 0` adds `input_top_logprobs` (per prompt
position from the start index, when it is >= 0) and `output_top_logprobs` (per output token): each the k most
likely `[logprob, token_id, text|None]`, the most likely first. `return_text_in_logprobs` fills the text when the
server has a tokenizer. Without `return_logprob` both fields are ignored, as SGLang does.

The values come from a teacher-forced scoring forward of the served model over prompt + output, run only for the
requests that ask (one extra forward each), on the distribution the engine samples from: `log_softmax(logits / T)`
with the request's temperature (raw logits when greedy), as SGLang's sampler computes output log-probs and their
top-k. An engine that cannot score (one without `score_tokens`, e.g. vLLM or a remote engine) answers a 400 naming
the field rather than wrong numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from rl_engines.rollout import GenerateRequest, InvalidRequestError, TokenScores

START, TOP = "logprob_start_len", "top_logprobs_num"


@runtime_checkable
class TokenScorer(Protocol):
    """An engine that can score a token sequence teacher-forced (`HFEngine.score_tokens`)."""

    def score_tokens(self, ids: Sequence[int], *, start: int, top_k: int, temperature: float) -> TokenScores:
        """Per-position log-probs of `ids` from `start`, with the `top_k` most likely tokens per position."""
        ...


@dataclass(frozen=True)
class LogprobAsk:
    """What one request asks beyond output log-probs: input log-probs from `start` (-1: none) and top-`top_k`."""

    start: int = -1
    top_k: int = 0

    @property
    def active(self) -> bool:
        """Whether a scoring forward is needed."""
        return self.start >= 0 or self.top_k > 0


def _per_request(value: Any, count: int, name: str, batch: bool) -> list[Any]:
    if batch and isinstance(value, list):
        if len(value) != count:
            raise InvalidRequestError(f"generate: {name} has {len(value)} entries for {count} prompts; send one each")
        return value
    return [value] * count


def _int(value: Any, name: str, where: str, default: int, least: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidRequestError(f"{where}: {name} must be an int >= {least}, got {value!r}")
    return value


def take_logprob_fields(body: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`body` without `logprob_start_len` / `top_logprobs_num` (the wire parser never sees them), and those."""
    out = dict(body)
    return out, {name: out.pop(name) for name in (START, TOP) if name in out}


def logprob_asks(
    fields: Mapping[str, Any], requests: Sequence[GenerateRequest], batch: bool, engine: Any
) -> list[LogprobAsk] | None:
    """Each request's ask (None when none needs a scoring forward); 400s name the bad field: a non-int or negative
    value, a start index at or past the prompt, or an engine that cannot score."""
    count = len(requests)
    starts = _per_request(fields.get(START), count, START, batch)
    tops = _per_request(fields.get(TOP), count, TOP, batch)
    asks = []
    for i, request in enumerate(requests):
        where = f"generate[{i}]" if batch else "generate"
        start = _int(starts[i], START, where, -1, -1)
        top_k = _int(tops[i], TOP, where, 0, 0)
        if start >= len(request.input_ids):
            raise InvalidRequestError(
                f"{where}: {START}={start} is not below the prompt's {len(request.input_ids)} tokens; send 0 to "
                f"{len(request.input_ids) - 1}, or -1 for output log-probs only"
            )
        asks.append(LogprobAsk(start, top_k) if request.return_logprobs else LogprobAsk())
    if not any(a.active for a in asks):
        return None
    if not isinstance(engine, TokenScorer):
        name = START if any(a.start >= 0 for a in asks) else TOP
        raise InvalidRequestError(
            f"generate: {name} needs an engine that can score prompts (the in-process HF engine), and this server "
            f"serves {type(engine).__name__}, which cannot; omit {START} and {TOP} (or send -1 and 0)"
        )
    return asks


def _entry(logprob: float | None, token: int, texts: Any) -> list[Any]:
    return [logprob, token, None if texts is None else texts.decode([token])]


def _top(top: Sequence[tuple[float, int]] | None, texts: Any) -> list[list[Any]] | None:
    return None if top is None else [_entry(lp, tok, texts) for lp, tok in top]


def add_prompt_logprobs(
    engine: TokenScorer,
    requests: Sequence[GenerateRequest],
    asks: Sequence[LogprobAsk],
    results: Sequence[dict[str, Any]],
    tokenizer: Any | None,
) -> None:
    """Score each asking request's prompt + final `output_ids` and add `input_token_logprobs`,
    `input_top_logprobs` and `output_top_logprobs` to its result's `meta_info` (`tokenizer` given: with text).
    Blocks for one forward per asking request: call it off the event loop."""
    for request, ask, data in zip(requests, asks, results, strict=True):
        if not ask.active:
            continue
        prompt = list(request.input_ids)
        ids = prompt + [int(t) for t in data["output_ids"]]
        begin = ask.start if ask.start >= 0 else len(prompt)
        if begin < len(ids):
            scores = engine.score_tokens(ids, start=begin, top_k=ask.top_k, temperature=request.sampling.temperature)
        else:  # output top-k only, and no output (prefill only): nothing to score
            scores = TokenScores(begin, (), ())
        cut = len(prompt) - begin
        meta = data["meta_info"]
        if ask.start >= 0:
            meta["input_token_logprobs"] = [
                _entry(lp, tok, tokenizer) for lp, tok in zip(scores.logprobs[:cut], prompt[begin:], strict=True)
            ]
            if ask.top_k > 0:
                meta["input_top_logprobs"] = [_top(top, tokenizer) for top in scores.top[:cut]]
        if ask.top_k > 0:
            meta["output_top_logprobs"] = [_top(top, tokenizer) for top in scores.top[max(cut, 0) :]]
