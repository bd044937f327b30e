"""Frozen, validated values that cross the engine protocol: sampling parameters, requests and outputs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from rl_core.workflows import Completion
from rl_engines.rollout._errors import InvalidRequestError

FinishReason = Literal["stop", "length", "abort"]
"""Why a request ended: a stop/EOS token (kept as the last output token), the token budget, or an abort."""
PauseMode = Literal["abort", "wait", "keep"]
"""What `pause` does to in-flight requests: end them with "abort", let them finish, or park them."""
EngineState = Literal["serving", "paused", "asleep", "stopped"]
LogprobMode = Literal["temperature", "raw"]
"""How an engine reports log-probs: of the temperature-scaled distribution, or of the raw logits."""
SleepTag = Literal["weights", "kv_cache"]
SLEEP_TAGS: tuple[str, ...] = get_args(SleepTag)
TokenCallback = Callable[[Sequence[tuple[str, int, float]]], None]
"""Called after every decoding step with `(rid, token_id, logprob)` of the tokens just produced."""

MAX_SEED = 2**63 - 1
"""Seeds feed `torch.Generator.manual_seed`, which takes a 64-bit value; we keep them non-negative int64."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _token_tuple(name: str, values: Sequence[int]) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise InvalidRequestError(f"{name} must be a sequence of token ids (ints), got {type(values).__name__}")
    out = tuple(values)
    bad = [v for v in out if not _is_int(v) or v < 0]
    if bad:
        raise InvalidRequestError(f"{name} must hold non-negative int token ids; found {bad[:3]!r}")
    return out


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one request (SGLang's names). `temperature=0` is greedy; `top_k=-1` disables top-k."""

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    seed: int | None = None
    """Seeds a generator owned by this request, so its draws do not depend on its batchmates."""
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if not _is_int(self.max_new_tokens) or self.max_new_tokens < 1:
            raise InvalidRequestError(f"max_new_tokens must be an int >= 1, got {self.max_new_tokens!r}")
        if not isinstance(self.temperature, (int, float)) or not 0.0 <= self.temperature < float("inf"):
            raise InvalidRequestError(f"temperature must be a finite float >= 0 (0 = greedy), got {self.temperature!r}")
        if not isinstance(self.top_p, (int, float)) or not 0.0 < self.top_p <= 1.0:
            raise InvalidRequestError(f"top_p must be in (0, 1], got {self.top_p!r}; use 1.0 to disable it")
        if not _is_int(self.top_k) or (self.top_k != -1 and self.top_k < 1):
            raise InvalidRequestError(f"top_k must be -1 (disabled) or an int >= 1, got {self.top_k!r}")
        if self.seed is not None and (not _is_int(self.seed) or not 0 <= self.seed <= MAX_SEED):
            raise InvalidRequestError(f"seed must be None or an int in [0, 2**63 - 1], got {self.seed!r}")
        object.__setattr__(self, "stop_token_ids", _token_tuple("stop_token_ids", self.stop_token_ids))
        object.__setattr__(self, "ignore_eos", bool(self.ignore_eos))

    @property
    def greedy(self) -> bool:
        """True when the request takes the argmax token at every step."""
        return self.temperature == 0.0


@dataclass(frozen=True)
class GenerateRequest:
    """One prompt as token ids, with its sampling parameters; `rid` is echoed in the output."""

    rid: str
    input_ids: tuple[int, ...]
    sampling: SamplingParams
    return_logprobs: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.rid, str) or not self.rid:
            raise InvalidRequestError(f"rid must be a non-empty str, got {self.rid!r}")
        ids = _token_tuple(f"input_ids of request {self.rid!r}", self.input_ids)
        if not ids:
            raise InvalidRequestError(f"request {self.rid!r} has an empty prompt; send at least one token id")
        object.__setattr__(self, "input_ids", ids)  # not-a-sample-field: GenerateRequest attribute
        if not isinstance(self.sampling, SamplingParams):
            raise InvalidRequestError(f"sampling of request {self.rid!r} must be a SamplingParams")


def check_weight_version(version: object, where: str) -> int:
    """`version` if it is a weight version (an int >= 0: the number of actor updates behind the weights), else
    `InvalidRequestError` naming `where`."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise InvalidRequestError(
            f"{where} must be a weight version, an int >= 0 (the policy version), got {version!r}"
            + ("; convert it with int(...) at the wire it came from" if isinstance(version, str) else "")
        )
    return version


def weight_version_from_wire(value: object, where: str) -> int:
    """The int weight version a wire field carries as a str (SGLang's HTTP protocol, its server args):
    `"3"` -> 3. Engines and the runtime use ints; only that wire spells versions as strings."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, str):
        raise InvalidRequestError(
            f"{where} must spell a weight version (an int >= 0, e.g. '3'), got {value!r}; start the server with "
            "--weight-version 0 and label updates with the policy version"
        )
    return check_weight_version(value, where)


def weight_version_to_wire(version: int) -> str:
    """`version` as SGLang's HTTP protocol carries it (a str)."""
    return str(version)


@dataclass(frozen=True)
class VersionSpan:
    """Output tokens `[start, end)` of a request were produced by weights of version `version`."""

    version: int
    start: int
    end: int


@dataclass(frozen=True)
class GenerateOutput:
    """The result of one request.

    `output_logprobs[i]` is the log-prob of `output_ids[i]` under the distribution it was sampled from
    (see the engine's `logprob_mode`). `weight_version` is the version of the weights that produced the last token
    (or, with no tokens, the weights current when the request ended); `version_spans` covers every token
    and has more than one entry only when a request was parked by `pause("keep")` across an update.
    """

    rid: str
    output_ids: tuple[int, ...]
    output_logprobs: tuple[float, ...] | None
    finish_reason: FinishReason
    weight_version: int
    prompt_len: int
    version_spans: tuple[VersionSpan, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.finish_reason not in get_args(FinishReason):
            raise InvalidRequestError(
                f"finish_reason must be one of {get_args(FinishReason)}, got {self.finish_reason!r}"
            )
        if self.output_logprobs is not None and len(self.output_logprobs) != len(self.output_ids):
            raise InvalidRequestError(
                f"output of {self.rid!r} has {len(self.output_logprobs)} log-probs for {len(self.output_ids)} tokens"
            )
        position = 0
        for span in self.version_spans:
            if span.start != position or span.end <= span.start:
                raise InvalidRequestError(f"version_spans of {self.rid!r} must tile the output: {self.version_spans}")
            position = span.end
        if self.version_spans and position != len(self.output_ids):
            raise InvalidRequestError(f"version_spans of {self.rid!r} end at {position}, not {len(self.output_ids)}")

    @property
    def versions(self) -> tuple[int, ...]:
        """The weight version of every output token, in order."""
        return tuple(span.version for span in self.version_spans for _ in range(span.end - span.start))

    def completion(self) -> Completion:
        """This output as a workflow's `Completion`: tokens, log-probs (0.0 where the engine reported none), and the
        version of every token (the output's `weight_version` where it has no spans)."""
        size = len(self.output_ids)
        log_probs = self.output_logprobs if self.output_logprobs is not None else (0.0,) * size
        versions = self.versions if self.version_spans else (self.weight_version,) * size
        return Completion(self.output_ids, log_probs, versions, self.finish_reason)


@dataclass(frozen=True)
class EngineStatus:
    """A snapshot of an engine: its state, current weight version and how many requests are in flight."""

    state: EngineState
    weight_version: int
    in_flight: int
    pause_mode: PauseMode | None = None
    asleep: frozenset[str] = frozenset()
    weights_loaded: bool = True


def check_requests(requests: Sequence[GenerateRequest]) -> list[GenerateRequest]:
    """Validate a batch for `generate`: non-empty, `GenerateRequest`s only, distinct rids."""
    if isinstance(requests, GenerateRequest) or not isinstance(requests, Sequence):
        raise InvalidRequestError("generate takes a sequence of GenerateRequest; wrap a single request in a list")
    batch = list(requests)
    if not batch:
        raise InvalidRequestError("generate got an empty request list; send at least one GenerateRequest")
    for request in batch:
        if not isinstance(request, GenerateRequest):
            raise InvalidRequestError(f"generate takes GenerateRequest items, got {type(request).__name__}")
    seen: set[str] = set()
    for request in batch:
        if request.rid in seen:
            raise InvalidRequestError(f"rid {request.rid!r} appears twice in one generate call; rids must be unique")
        seen.add(request.rid)
    return batch
