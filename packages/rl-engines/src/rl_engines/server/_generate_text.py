"""The text side of `/generate` (SGLang's native protocol) over the served tokenizer.

With a tokenizer (`--tokenizer`), a request may carry `text` (a prompt string, or a list of them for a batch)
instead of `input_ids`, tokenised as SGLang does (`tokenizer(text)`, the tokenizer's own special tokens); every
answer then carries `text`, the decoded output, and `sampling_params.stop` strings end a request. Decoding follows
SGLang's detokenizer: incremental, with up to 5 prompt tokens as context (so a sentencepiece leading space
survives), a trailing incomplete character held back while streaming, and the matched stop trimmed from the text
unless `no_stop_trim` (a stop token: the last token's text; a stop string: the string and all after it). A request
that meets a stop string keeps its tokens up to the one completing it (their log-probs are the behaviour's) and
finishes `{"type": "stop", "matched": "<the string>"}`. `return_text_in_logprobs` fills the third entry of each
`output_token_logprobs` item with the token's text. Without a tokenizer the answers are token ids only, as before,
and `text` or `stop` answer 501 naming `--tokenizer`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rl_engines.remote._wire_generate import strict_bool
from rl_engines.rollout import GenerateOutput, GenerateRequest, InvalidRequestError, VersionSpan
from rl_engines.server._fastapi import JSONResponse

CONTEXT_TOKENS = 5
"""Prompt tokens decoded ahead of the output for context (SGLang's INIT_INCREMENTAL_DETOKENIZATION_OFFSET)."""
_IDS = "input_ids"  # not-a-sample-field: SGLang's HTTP field
_REPLACEMENT = "\ufffd"


class NoTokenizerError(InvalidRequestError):
    """A request needs text but the server has no tokenizer (answered 501)."""


def no_tokenizer_response(error: NoTokenizerError) -> Any:
    """The 501 answer, in `/generate`'s error shape (its type lets a client re-raise `InvalidRequestError`)."""
    return JSONResponse(
        {"error": {"message": str(error), "type": InvalidRequestError.__name__, "code": 501}}, status_code=501
    )


@dataclass(frozen=True)
class TextOptions:
    """How one request's output becomes text (SGLang's text-only `sampling_params`)."""

    stop: tuple[str, ...] = ()
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    no_stop_trim: bool = False


@dataclass(frozen=True)
class Prepared:
    """A `/generate` body ready for `parse_generate_payload` (text tokenised, `stop` taken out), and the text side
    (None: the server has no tokenizer, so answers stay token ids only)."""

    body: dict[str, Any]
    text: GenerateText | None


def _stops(value: Any, where: str) -> tuple[str, ...]:
    stops = [value] if isinstance(value, str) else value
    if stops is None or value == "":
        return ()
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise InvalidRequestError(
            f"{where}: sampling_params.stop must be a non-empty string or a list of them, got {value!r}"
        )
    return tuple(stops)


def _needs_tokenizer(what: str) -> NoTokenizerError:
    return NoTokenizerError(
        f"generate: {what} needs the served model's tokenizer, and this server was started without one; restart it "
        "with --tokenizer <folder> (or a --model folder holding the tokenizer files), or send input_ids"
    )


def prepare(body: Mapping[str, Any], tokenizer: Any | None) -> Prepared:
    """Check that exactly one of `text` / `input_ids` is given, tokenise `text`, and take the text options out of
    each `sampling_params` (`stop` is removed, so the token-level parser never sees it)."""
    has_text, has_ids = body.get("text") is not None, body.get(_IDS) is not None
    if has_text and has_ids:
        raise InvalidRequestError("generate: send exactly one of text and input_ids, got both; drop one of them")
    if not has_text and not has_ids:
        raise InvalidRequestError(
            "generate: send exactly one of text (a prompt string, or a list of them) and input_ids (token ids, or a "
            "list of such lists), got neither"
        )
    out = dict(body)
    samplings = out.get("sampling_params")
    entries = samplings if isinstance(samplings, list) else [samplings]
    wants_stop = any(isinstance(s, Mapping) and s.get("stop") not in (None, [], "") for s in entries)
    if tokenizer is None:
        if has_text:
            raise _needs_tokenizer("a text prompt")
        if wants_stop:
            raise _needs_tokenizer("sampling_params.stop (stop strings)")
        return Prepared(out, None)
    text = GenerateText(
        tokenizer, strict_bool(out.pop("return_text_in_logprobs", None), "return_text_in_logprobs", "generate")
    )
    if has_text:
        out[_IDS] = text.encode_prompts(out.pop("text"))
    else:
        out.pop("text", None)
    ids = out[_IDS]
    count = len(ids) if isinstance(ids, list) and ids and isinstance(ids[0], list) else 1
    if isinstance(samplings, list):
        out["sampling_params"] = [_without_stop(s) for s in samplings]
    elif samplings is not None:
        out["sampling_params"] = _without_stop(samplings)
    options = []
    for i in range(count):
        sampling = samplings[i] if isinstance(samplings, list) and i < len(samplings) else samplings
        options.append(_options(sampling, f"generate[{i}]" if count > 1 else "generate"))
    text.options = options
    return Prepared(out, text)


def _without_stop(sampling: Any) -> Any:
    if not isinstance(sampling, Mapping):
        return sampling  # the parser names the wrong type
    return {k: v for k, v in sampling.items() if k != "stop"}


def _options(sampling: Any, where: str) -> TextOptions:
    if not isinstance(sampling, Mapping):
        return TextOptions()
    return TextOptions(
        stop=_stops(sampling.get("stop"), where),
        skip_special_tokens=strict_bool(
            sampling.get("skip_special_tokens"), "sampling_params.skip_special_tokens", where, True
        ),
        spaces_between_special_tokens=strict_bool(
            sampling.get("spaces_between_special_tokens"), "sampling_params.spaces_between_special_tokens", where, True
        ),
        no_stop_trim=strict_bool(sampling.get("no_stop_trim"), "sampling_params.no_stop_trim", where),
    )


class Detokenizer:
    """One request's output as text, decoded incrementally as SGLang's detokenizer does."""

    def __init__(self, tokenizer: Any, prompt: Sequence[int], options: TextOptions) -> None:
        self.tokenizer, self.options = tokenizer, options
        self.context: list[int] = list(prompt[max(len(prompt) - CONTEXT_TOKENS, 0) :])
        self.ids: list[int] = list(self.context)
        self.surr, self.read = 0, len(self.context)
        self.text = ""
        """The committed text (complete characters only)."""

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(
            list(ids),
            skip_special_tokens=self.options.skip_special_tokens,
            spaces_between_special_tokens=self.options.spaces_between_special_tokens,
        )

    def push(self, new_ids: Sequence[int]) -> str:
        """Add tokens; the committed text so far (a trailing incomplete character waits for the next token)."""
        self.ids.extend(new_ids)
        new = self._decode(self.ids[self.surr :])[len(self._decode(self.ids[self.surr : self.read])) :]
        if new and not new.endswith(_REPLACEMENT):
            self.text += new
            self.surr, self.read = self.read, len(self.ids)
        return self.text

    def final(self, output_ids: Sequence[int], matched_token: bool) -> str:
        """The text of `output_ids`, without the stop token that ended it (`matched_token`) unless `no_stop_trim`."""
        ids = output_ids[:-1] if matched_token and not self.options.no_stop_trim else output_ids
        return self._decode([*self.context, *ids])[len(self._decode(self.context)) :]


def _held_back(text: str, stops: Sequence[str]) -> str:
    """`text` without a tail that could be the start of a stop string (streamed text must never be taken back)."""
    hold = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), hold, -1):
            if text.endswith(stop[:size]):
                hold = size
                break
    return text[: len(text) - hold]


def _first_stop(text: str, stops: Sequence[str], start: int = 0) -> tuple[int, str] | None:
    hits = [(position, stop) for stop in stops if (position := text.find(stop, start)) != -1]
    return min(hits) if hits else None


def _cut(output: GenerateOutput, keep: int) -> GenerateOutput:
    """`output`'s first `keep` tokens, finished by a stop string."""
    spans = tuple(VersionSpan(s.version, s.start, min(s.end, keep)) for s in output.version_spans if s.start < keep)
    version = spans[-1].version if spans else output.weight_version
    logprobs = output.output_logprobs[:keep] if output.output_logprobs is not None else None
    return replace(
        output,
        output_ids=output.output_ids[:keep],
        output_logprobs=logprobs,
        finish_reason="stop",
        weight_version=version,
        version_spans=spans,
    )


def _tokens_through(decoder: Detokenizer, ids: Sequence[int], end: int) -> int:
    """The fewest of `ids` whose text reaches `end` characters."""
    low, high = 1, len(ids)
    while low < high:
        middle = (low + high) // 2
        if len(decoder.final(ids[:middle], False)) >= end:
            high = middle
        else:
            low = middle + 1
    return high


class GenerateText:
    """Tokenises `text` prompts and turns outputs into SGLang's text answers (see the module doc)."""

    def __init__(self, tokenizer: Any, text_in_logprobs: bool) -> None:
        self.tokenizer = tokenizer
        self.text_in_logprobs = text_in_logprobs
        self.options: list[TextOptions] = []
        self._decoders: list[Detokenizer] = []
        self._stopped: dict[int, str] = {}

    def encode_prompts(self, text: Any) -> list[int] | list[list[int]]:
        """Token ids of a prompt string, or of each string of a batch."""
        if isinstance(text, str):
            return self._encode(text, "text")
        if not isinstance(text, list) or not text:
            raise InvalidRequestError(f"generate: text must be a string or a non-empty list of strings, got {text!r}")
        return [self._encode(t, f"text[{i}]") for i, t in enumerate(text)]

    def _encode(self, text: Any, where: str) -> list[int]:
        if not isinstance(text, str):
            raise InvalidRequestError(f"generate: {where} must be a string, got {type(text).__name__}")
        ids = list(self.tokenizer(text)[_IDS])
        if not ids:
            raise InvalidRequestError(f"generate: {where} is {text!r}, which tokenises to no tokens; send a prompt")
        return ids

    def start(self, requests: Sequence[GenerateRequest]) -> None:
        """Begin decoding `requests` (in the order their outputs will come)."""
        self._decoders = [
            Detokenizer(self.tokenizer, r.input_ids, o) for r, o in zip(requests, self.options, strict=True)
        ]
        self._stopped = {}

    def push(self, i: int, new_ids: Sequence[int]) -> str | None:
        """Request `i`'s committed text after `new_ids`, or None once it met a stop string (it sends no more)."""
        if i in self._stopped:
            return None
        decoder = self._decoders[i]
        before = len(decoder.text)
        text = decoder.push(new_ids)
        stops = self.options[i].stop
        if not stops:
            return text
        if (hit := _first_stop(text, stops, max(0, before - max(map(len, stops)) + 1))) is not None:
            self._stopped[i] = hit[1]
            return None
        return _held_back(text, stops)

    def stopped(self, i: int) -> bool:
        """Whether request `i` met a stop string while streaming (its engine request can be aborted)."""
        return i in self._stopped

    def finish(self, i: int, output: GenerateOutput) -> tuple[GenerateOutput, str, str | None]:
        """Request `i`'s output cut at its first stop string, its text, and the stop string matched (or None)."""
        options, decoder = self.options[i], self._decoders[i]
        text = decoder.final(output.output_ids, output.finish_reason == "stop")
        hit = _first_stop(text, options.stop)
        if hit is None:
            return output, text, None
        position, stop = hit
        keep = _tokens_through(decoder, output.output_ids, position + len(stop))
        end = position + len(stop) if options.no_stop_trim else position
        return _cut(output, keep), text[:end], stop

    def token_texts(self, meta: dict[str, Any]) -> None:
        """Fill the text of each `output_token_logprobs` entry when the request asked for it."""
        if self.text_in_logprobs and "output_token_logprobs" in meta:
            meta["output_token_logprobs"] = [
                [lp, tok, self.tokenizer.decode([tok])] for lp, tok, _ in meta["output_token_logprobs"]
            ]


def with_text(data: dict[str, Any], text: str, text_side: GenerateText) -> dict[str, Any]:
    """`data` (one `/generate` result or chunk) with SGLang's `text` first and token texts in its log-probs."""
    text_side.token_texts(data["meta_info"])
    return {"text": text, **data}
