"""OpenAI request bodies checked field by field: `/v1/chat/completions` and `/v1/completions` parsed into frozen values.

Every refusal is an `OpenAIError` (HTTP 400 unless said otherwise) naming the field (`param`), what was expected,
what was found and the fix; the routes answer it in OpenAI's error shape. Parameters this server cannot honour
(penalties, logit bias, alternatives' log-probs, forced tool choice) are refused by name, never ignored; `stream`
and `stream_options` are taken out by the routes before parsing (`_openai_stream`).
"""
# pyright: reportUnnecessaryIsInstance=false
# (the checks guard JSON from clients, whatever the annotations say)

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from rl_core import nearest_name
from rl_core.tools import ToolConfigError, check_tool_schema
from rl_engines.rollout import InvalidRequestError
from rl_engines.rollout._types import MAX_SEED

ROLES = ("system", "developer", "user", "assistant", "tool")
"""Message roles accepted; "developer" is rendered as "system" (chat templates know the latter)."""
MAX_N = 16
"""Choices per request."""
MAX_STOP = 4
"""Stop strings per request (OpenAI's limit)."""
DEFAULT_COMPLETION_MAX_TOKENS = 16
"""`/v1/completions` without `max_tokens` (OpenAI's default); chat defaults to the room left in the context."""

_COMMON = (
    "model",
    "temperature",
    "top_p",
    "n",
    "max_tokens",
    "stop",
    "seed",
    "logprobs",
    "user",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "return_rl",
)
CHAT_FIELDS = frozenset(
    (
        *_COMMON,
        "messages",
        "max_completion_tokens",
        "top_logprobs",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "response_format",
        "metadata",
        "store",
    )
)
COMPLETION_FIELDS = frozenset((*_COMMON, "prompt", "echo", "suffix", "best_of"))


class OpenAIError(InvalidRequestError):
    """A request this server refuses, answered as `{"error": {"message", "type", "param", "code"}}`."""

    def __init__(
        self, message: str, param: str | None, *, status: int = 400, kind: str = "invalid_request_error"
    ) -> None:
        super().__init__(message)
        self.param = param
        self.status = status
        self.kind = kind

    def body(self) -> dict[str, Any]:
        """The error in OpenAI's shape."""
        return {"error": {"message": str(self), "type": self.kind, "param": self.param, "code": None}}


@dataclass(frozen=True)
class Sampling:
    """The sampling fields both endpoints share, checked."""

    model: str
    temperature: float
    top_p: float
    n: int
    max_tokens: int | None
    """None: the endpoint's default (chat: the room left in the context; completions: 16)."""
    max_tokens_field: str
    """The field `max_tokens` came from (named in the context-length error)."""
    stop: tuple[str, ...]
    seed: int | None
    logprobs: bool
    return_rl: bool


@dataclass(frozen=True)
class ChatRequest:
    """A checked `/v1/chat/completions` body; `messages` are plain dicts ready for a chat template."""

    sampling: Sampling
    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]
    parse_tools: bool
    """False with `tool_choice: "none"`: the reply is plain text even when it holds `<tool_call>` tags."""


@dataclass(frozen=True)
class CompletionRequest:
    """A checked `/v1/completions` body: the prompt as text, or as token ids."""

    sampling: Sampling
    prompt: str | tuple[int, ...]


def _check_known(body: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    for key in body:
        if key not in known:
            hint = nearest_name(key, sorted(known))
            fix = f"did you mean {hint!r}?" if hint else f"known fields: {sorted(known)}"
            raise OpenAIError(f"{where}: unrecognized request argument {key!r}; {fix}", key)


def _number(body: Mapping[str, Any], name: str, low: float, high: float, default: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise OpenAIError(f"{name} must be a number in [{low}, {high}], got {value!r}", name)
    return float(value)


def _int(body: Mapping[str, Any], name: str, low: int, high: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise OpenAIError(f"{name} must be an integer {bound}, got {value!r}", name)
    return value


def _refuse_unsupported(body: Mapping[str, Any]) -> None:
    for name in ("presence_penalty", "frequency_penalty"):
        if body.get(name) not in (None, 0, 0.0):
            raise OpenAIError(f"{name} is not supported (only 0); got {body[name]!r}: omit it", name)
    if body.get("logit_bias"):
        raise OpenAIError("logit_bias is not supported; omit it or send {}", "logit_bias")


def _stop(body: Mapping[str, Any]) -> tuple[str, ...]:
    value = body.get("stop")
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if (
        not isinstance(stops, list)
        or len(stops) > MAX_STOP
        or not all(isinstance(s, str) and s for s in cast("list[Any]", stops))
    ):
        raise OpenAIError(
            f"stop must be a non-empty string or a list of up to {MAX_STOP} of them, got {value!r}", "stop"
        )
    return tuple(cast("list[str]", stops))


def _sampling(body: Mapping[str, Any], max_tokens_field: str, logprobs: bool) -> Sampling:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise OpenAIError(
            f"model is required, a non-empty string (any name: this server serves one model), got {model!r}", "model"
        )
    return_rl = body.get("return_rl", False)
    if not isinstance(return_rl, bool):
        raise OpenAIError(f"return_rl must be true or false, got {return_rl!r}", "return_rl")
    return Sampling(
        model=model,
        temperature=_number(body, "temperature", 0.0, 2.0, 1.0),
        top_p=_number(body, "top_p", 1e-9, 1.0, 1.0),
        n=_int(body, "n", 1, MAX_N) or 1,
        max_tokens=_int(body, max_tokens_field, 1),
        max_tokens_field=max_tokens_field,
        stop=_stop(body),
        seed=_int(body, "seed", 0, MAX_SEED),
        logprobs=logprobs,
        return_rl=return_rl,
    )


def _content(value: Any, where: str) -> str | None:
    """Message content as text: a string, or a list of `{"type": "text", "text": ...}` parts joined."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        texts: list[str] = []
        for i, part in enumerate(cast("list[Any]", value)):
            if not isinstance(part, Mapping) or part.get("type") != "text" or not isinstance(part.get("text"), str):  # pyright: ignore[reportUnknownMemberType]
                raise OpenAIError(
                    f"{where}[{i}] must be a text part {{'type': 'text', 'text': ...}} (this server reads text only), "
                    f"got {part!r}",
                    where,
                )
            texts.append(cast("Mapping[str, str]", part)["text"])
        return "".join(texts)
    raise OpenAIError(f"{where} must be a string or a list of text parts, got {type(value).__name__}", where)


def _tool_calls(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise OpenAIError(f"{where} must be a list of tool calls, got {type(value).__name__}", where)
    calls: list[dict[str, Any]] = []
    for i, call in enumerate(cast("list[Any]", value)):
        function = call.get("function") if isinstance(call, Mapping) else None  # pyright: ignore[reportUnknownMemberType]
        name = function.get("name") if isinstance(function, Mapping) else None  # pyright: ignore[reportUnknownMemberType]
        arguments = function.get("arguments", "{}") if isinstance(function, Mapping) else None  # pyright: ignore[reportUnknownMemberType]
        if not isinstance(name, str) or not isinstance(arguments, str):
            raise OpenAIError(
                f'{where}[{i}] must be {{"id": ..., "type": "function", "function": {{"name": str, "arguments": '
                f"JSON string}}}}, got {call!r}",
                f"{where}[{i}]",
            )
        calls.append({"id": call.get("id"), "type": "function", "function": {"name": name, "arguments": arguments}})
    return calls


def _message(value: Any, i: int) -> dict[str, Any]:
    where = f"messages[{i}]"
    if not isinstance(value, Mapping):
        raise OpenAIError(f"{where} must be an object with 'role' and 'content', got {type(value).__name__}", where)
    message = cast("Mapping[str, Any]", value)
    role = message.get("role")
    if role not in ROLES:
        raise OpenAIError(f"{where}.role must be one of {list(ROLES)}, got {role!r}", f"{where}.role")
    content = _content(message.get("content"), f"{where}.content")
    out: dict[str, Any] = {"role": "system" if role == "developer" else role, "content": content}
    if role == "assistant" and message.get("tool_calls"):
        out["tool_calls"] = _tool_calls(message["tool_calls"], f"{where}.tool_calls")
    elif content is None:
        raise OpenAIError(f"{where}.content is required for a {role} message (a string)", f"{where}.content")
    if role == "tool" and message.get("tool_call_id") is not None:
        out["tool_call_id"] = message["tool_call_id"]
    if isinstance(message.get("name"), str):
        out["name"] = message["name"]
    return out


def _tools(body: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    value = body.get("tools")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise OpenAIError(f"tools must be a list of function schemas, got {type(value).__name__}", "tools")
    tools: list[dict[str, Any]] = []
    for i, tool in enumerate(cast("list[Any]", value)):
        try:
            check_tool_schema(tool if isinstance(tool, Mapping) else {})  # pyright: ignore[reportUnknownArgumentType]
        except ToolConfigError as exc:
            raise OpenAIError(f"tools[{i}]: {exc}", f"tools[{i}]") from None
        tools.append(json.loads(json.dumps(tool)))
    return tuple(tools)


def _parse_tools_choice(body: Mapping[str, Any]) -> bool:
    choice = body.get("tool_choice")
    if choice in (None, "auto"):
        return True
    if choice == "none":
        return False
    raise OpenAIError(
        f"tool_choice {choice!r} is not supported: this server cannot force a call; send 'auto' or 'none'",
        "tool_choice",
    )


def parse_chat(body: Mapping[str, Any]) -> ChatRequest:
    """A `/v1/chat/completions` body checked (see the module doc)."""
    _check_known(body, CHAT_FIELDS, "chat.completions")
    _refuse_unsupported(body)
    if body.get("top_logprobs") not in (None, 0):
        raise OpenAIError(
            "top_logprobs > 0 is not supported: this server reports the sampled token's log-prob only; send "
            "logprobs=true without top_logprobs",
            "top_logprobs",
        )
    response_format = body.get("response_format")
    if response_format is not None and response_format != {"type": "text"}:
        raise OpenAIError(
            f"response_format {response_format!r} is not supported; only {{'type': 'text'}}", "response_format"
        )
    logprobs = body.get("logprobs", False)
    if not isinstance(logprobs, bool) and logprobs is not None:
        raise OpenAIError(f"logprobs must be true or false, got {logprobs!r}", "logprobs")
    if body.get("max_tokens") is not None and body.get("max_completion_tokens") is not None:
        raise OpenAIError("give max_tokens or max_completion_tokens, not both", "max_completion_tokens")
    field = "max_tokens" if body.get("max_tokens") is not None else "max_completion_tokens"
    sampling = _sampling(body, field, bool(logprobs))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise OpenAIError(f"messages must be a non-empty list of messages, got {messages!r}", "messages")
    parsed = tuple(_message(m, i) for i, m in enumerate(cast("list[Any]", messages)))
    return ChatRequest(sampling, parsed, _tools(body), _parse_tools_choice(body))


def parse_completion(body: Mapping[str, Any]) -> CompletionRequest:
    """A `/v1/completions` body checked (see the module doc)."""
    _check_known(body, COMPLETION_FIELDS, "completions")
    _refuse_unsupported(body)
    if body.get("echo"):
        raise OpenAIError("echo=true is not supported; omit it", "echo")
    if body.get("suffix"):
        raise OpenAIError("suffix is not supported; omit it", "suffix")
    if body.get("best_of") not in (None, 1, body.get("n")):
        raise OpenAIError(f"best_of must equal n (or be omitted), got {body['best_of']!r}", "best_of")
    logprobs = body.get("logprobs")
    if logprobs not in (None, 0) or isinstance(logprobs, bool):
        raise OpenAIError(
            f"logprobs must be 0 (the sampled tokens' log-probs; this server reports no alternatives), "
            f"got {logprobs!r}",
            "logprobs",
        )
    prompt = body.get("prompt")
    if isinstance(prompt, str) and prompt:
        text: str | tuple[int, ...] = prompt
    elif (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in cast("list[Any]", prompt))
    ):
        text = tuple(cast("list[int]", prompt))
    else:
        raise OpenAIError(
            f"prompt must be one non-empty string or one list of token ids (one prompt per request), got {prompt!r}",
            "prompt",
        )
    return CompletionRequest(_sampling(body, "max_tokens", logprobs is not None), text)
