"""SGLang's native `/generate` JSON, both directions: requests from `GenerateRequest`s and outputs back.

Request: `{"input_ids": [[...]], "sampling_params": [{...}], "rid": [...], "return_logprob": [...], "stream"}`
(single-request form: one list of ids, one dict, one rid). Output per request:
`{"output_ids": [...], "meta_info": {"id", "finish_reason": {"type": "length"|"stop"|"abort", ...},
"prompt_tokens", "completion_tokens", "cached_tokens", "weight_version",
"output_token_logprobs": [[logprob, token_id, null], ...], "version_spans": [[version, start, end], ...]}}`;
`version_spans` is our addition (absent from SGLang). Parsing is strict: an unknown field or a field we
cannot honour is rejected by name rather than silently ignored.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from rl_core import nearest_name
from rl_engines.remote._errors import ProtocolError
from rl_engines.rollout import (
    GenerateOutput,
    GenerateRequest,
    InvalidRequestError,
    SamplingParams,
    VersionSpan,
)
from rl_engines.rollout._types import weight_version_from_wire, weight_version_to_wire

TOP_K_DISABLED_MIN = 1 << 30
"""SGLang's "whole vocabulary" top-k (`TOP_K_ALL`); any value this large means top-k is off."""
_SAMPLING_FIELDS = {"max_new_tokens", "temperature", "top_p", "top_k", "stop_token_ids", "ignore_eos", "sampling_seed"}
_TEXT_ONLY_SAMPLING = {"skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim", "stream_interval"}
"""Fields that only change detokenised text: ignored by this token-level parser; the rollout server reads them
itself when it has a tokenizer (`rl_engines.server._generate_text`, which also turns `text` prompts into ids and
takes `stop` strings out before this parser runs)."""
_NEUTRAL_SAMPLING: dict[str, tuple[Any, ...]] = {
    "min_p": (0, 0.0),
    "frequency_penalty": (0, 0.0),
    "presence_penalty": (0, 0.0),
    "repetition_penalty": (1, 1.0),
    "min_new_tokens": (0,),
    "n": (1,),
    "stop": ((), []),
    "stop_regex": ((), []),
    "json_schema": (),
    "regex": (),
    "ebnf": (),
    "structural_tag": (),
    "custom_params": ({},),
    "logit_bias": ({},),
}
"""SGLang sampling fields this server does not implement, with the values that mean "off" (None always does)."""
_REQUEST_FIELDS = {
    "input_ids",  # not-a-sample-field: SGLang's HTTP field
    "sampling_params",
    "rid",
    "return_logprob",
    "stream",
}
_IGNORED_REQUEST = {"priority", "log_metrics", "return_text_in_logprobs", "routed_dp_rank", "data_parallel_rank"}
_NEUTRAL_REQUEST: dict[str, tuple[Any, ...]] = {
    "text": (),
    "input_embeds": (),
    "image_data": ([],),
    "audio_data": ([],),
    "video_data": ([],),
    "lora_path": (),
    "lora_id": (),
    "custom_logit_processor": (),
    "session_params": (),
    "token_ids_logprob": (),
    "top_logprobs_num": (0,),
    "logprob_start_len": (-1,),
    "return_hidden_states": (False,),
    "bootstrap_host": (),
    "bootstrap_port": (),
    "bootstrap_room": (),
}
"""SGLang request fields this parser does not implement, with their "off" values. The rollout server takes
`text` (`_generate_text`) and `logprob_start_len` / `top_logprobs_num` (`_generate_logprobs`, prompt log-probs
from a scoring forward) out of the body before this parser runs."""


def _neutral(value: Any, offs: tuple[Any, ...]) -> bool:
    """Whether `value` means "off": None, one of `offs`, or (batch form) a list of such values."""
    if value is None or any(value == ok and type(value) is type(ok) for ok in offs):
        return True
    # SGLang treats `[]` (and `[[], []]` in a batch, AReaL's form) as "no images".
    return isinstance(value, list) and [] in offs and all(v is None or v == [] for v in value)


def strict_bool(value: Any, name: str, where: str, default: bool = False) -> bool:
    """`value` as a JSON boolean (None gives `default`); a string such as "false" is an error, never truthy."""
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidRequestError(f"{where}: {name} must be true or false (a JSON boolean), got {value!r}")
    return value


def _check_fields(body: Mapping[str, Any], known: set[str], ignored: set[str], neutral: dict, where: str) -> None:
    for key, value in body.items():
        if key in known or key in ignored:
            continue
        if key in neutral:
            if _neutral(value, neutral[key]):
                continue
            raise InvalidRequestError(f"{where}: {key}={value!r} is not supported by this server; omit it or send null")
        candidates = sorted(known | ignored | set(neutral))
        hint = nearest_name(key, candidates)
        suggestion = f"; did you mean {hint!r}?" if hint else f"; known fields: {candidates}"
        raise InvalidRequestError(f"{where}: unknown field {key!r}{suggestion}")


def sampling_to_json(sampling: SamplingParams) -> dict[str, Any]:
    """SGLang `sampling_params` for one request."""
    out: dict[str, Any] = {
        "max_new_tokens": sampling.max_new_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "stop_token_ids": list(sampling.stop_token_ids),
        "ignore_eos": sampling.ignore_eos,
    }
    if sampling.seed is not None:
        out["sampling_seed"] = sampling.seed
    return out


def sampling_from_json(body: Any, where: str) -> SamplingParams:
    """`SamplingParams` from SGLang `sampling_params`; raises `InvalidRequestError` naming the bad field."""
    if not isinstance(body, Mapping):
        raise InvalidRequestError(f"{where}: sampling_params must be an object, got {type(body).__name__}")
    _check_fields(body, _SAMPLING_FIELDS, _TEXT_ONLY_SAMPLING, _NEUTRAL_SAMPLING, f"{where}.sampling_params")
    if "max_new_tokens" not in body or body["max_new_tokens"] is None:
        raise InvalidRequestError(f"{where}: sampling_params.max_new_tokens is required (no default is assumed)")
    top_k = body.get("top_k")
    top_k = -1 if top_k is None or (isinstance(top_k, int) and top_k >= TOP_K_DISABLED_MIN) else top_k
    return SamplingParams(
        max_new_tokens=body["max_new_tokens"],
        temperature=1.0 if body.get("temperature") is None else body["temperature"],
        top_p=1.0 if body.get("top_p") is None else body["top_p"],
        top_k=top_k,
        seed=body.get("sampling_seed"),
        stop_token_ids=tuple(body.get("stop_token_ids") or ()),
        ignore_eos=strict_bool(body.get("ignore_eos"), "sampling_params.ignore_eos", where),
    )


def generate_payload(requests: Sequence[GenerateRequest], *, stream: bool) -> dict[str, Any]:
    """The batch-form `/generate` body for `requests`."""
    return {
        "input_ids": [list(r.input_ids) for r in requests],  # not-a-sample-field: SGLang's HTTP field
        "sampling_params": [sampling_to_json(r.sampling) for r in requests],
        "rid": [r.rid for r in requests],
        "return_logprob": [r.return_logprobs for r in requests],
        "stream": stream,
    }


def _per_request(value: Any, count: int, name: str, batch: bool) -> list[Any]:
    if batch and isinstance(value, list):
        if len(value) != count:
            raise InvalidRequestError(f"{name} has {len(value)} entries for {count} prompts; send one per prompt")
        return value
    return [value] * count


def parse_generate_payload(body: Mapping[str, Any]) -> tuple[list[GenerateRequest], bool, bool]:
    """`(requests, batch_form, stream)` from a `/generate` body; raises `InvalidRequestError` if malformed."""
    _check_fields(body, _REQUEST_FIELDS, _IGNORED_REQUEST, _NEUTRAL_REQUEST, "generate")
    ids = body.get("input_ids")  # not-a-sample-field: SGLang's HTTP field
    if not isinstance(ids, list) or not ids:
        raise InvalidRequestError("generate: input_ids must be a non-empty list of token ids (or a list of such lists)")
    batch = isinstance(ids[0], list)
    prompts = ids if batch else [ids]
    count = len(prompts)
    samplings = _per_request(body.get("sampling_params"), count, "sampling_params", batch)
    rids = body.get("rid")
    if rids is None:
        rid_list = [uuid.uuid4().hex for _ in prompts]
    elif batch:
        if not isinstance(rids, list):
            raise InvalidRequestError("generate: a batch needs rid as a list with one rid per prompt")
        rid_list = _per_request(rids, count, "rid", batch)
    else:
        rid_list = [rids]
    logprobs = _per_request(body.get("return_logprob", False), count, "return_logprob", batch)
    requests = []
    for i, prompt in enumerate(prompts):
        where = f"generate[{i}]" if batch else "generate"
        if not isinstance(prompt, list):
            raise InvalidRequestError(f"{where}: input_ids entries must all be lists of token ids")
        sampling = sampling_from_json(samplings[i] if samplings[i] is not None else {}, where)
        if not isinstance(rid_list[i], str):
            raise InvalidRequestError(f"{where}: rid must be a str, got {rid_list[i]!r}")
        return_logprob = strict_bool(logprobs[i], "return_logprob", where)
        requests.append(GenerateRequest(rid_list[i], tuple(prompt), sampling, return_logprob))
    return requests, batch, strict_bool(body.get("stream"), "stream", "generate")


def finish_reason_json(output: GenerateOutput) -> dict[str, Any]:
    """SGLang's `meta_info.finish_reason` for a finished output."""
    if output.finish_reason == "length":
        return {"type": "length", "length": len(output.output_ids)}
    if output.finish_reason == "stop":
        return {"type": "stop", "matched": output.output_ids[-1] if output.output_ids else None}
    return {"type": "abort", "message": "request aborted", "status_code": None, "err_type": None}


def output_to_json(
    rid: str,
    output_ids: Sequence[int],
    logprobs: Sequence[float] | None,
    prompt_len: int,
    weight_version: int,
    finish_reason: dict[str, Any] | None,
    version_spans: Sequence[VersionSpan] = (),
) -> dict[str, Any]:
    """One `/generate` result (or stream chunk, with `finish_reason` None while running)."""
    meta: dict[str, Any] = {
        "id": rid,
        "finish_reason": finish_reason,
        "prompt_tokens": prompt_len,
        "completion_tokens": len(output_ids),
        "cached_tokens": 0,
        "weight_version": weight_version_to_wire(weight_version),
    }
    if logprobs is not None:
        meta["output_token_logprobs"] = [[lp, tok, None] for lp, tok in zip(logprobs, output_ids, strict=True)]
    if version_spans:
        meta["version_spans"] = [[weight_version_to_wire(s.version), s.start, s.end] for s in version_spans]
    return {"output_ids": list(output_ids), "meta_info": meta}


def generate_output_json(output: GenerateOutput) -> dict[str, Any]:
    """The final `/generate` result of `output`."""
    return output_to_json(
        output.rid,
        output.output_ids,
        output.output_logprobs,
        output.prompt_len,
        output.weight_version,
        finish_reason_json(output),
        output.version_spans,
    )


def logprob_pairs(meta: Mapping[str, Any]) -> list[tuple[float, int]]:
    """`(logprob, token_id)` pairs of `meta_info.output_token_logprobs` (empty when absent)."""
    entries = meta.get("output_token_logprobs") or []
    try:
        return [(float(entry[0]), int(entry[1])) for entry in entries]
    except (TypeError, ValueError, IndexError) as error:
        raise ProtocolError(f"malformed output_token_logprobs {entries[:2]!r}: {error}") from None


def output_from_json(data: Any, request: GenerateRequest) -> GenerateOutput:
    """A `GenerateOutput` from one finished `/generate` result; raises `ProtocolError` if malformed."""
    try:
        meta = data["meta_info"]
        ids = tuple(int(t) for t in data["output_ids"])
        finish = meta["finish_reason"]
        reason = finish["type"] if isinstance(finish, Mapping) else finish
        version = weight_version_from_wire(meta["weight_version"], "meta_info.weight_version")
        spans = tuple(
            VersionSpan(weight_version_from_wire(v, "meta_info.version_spans"), int(s), int(e))
            for v, s, e in meta.get("version_spans") or ()
        )
        prompt_len = int(meta.get("prompt_tokens", len(request.input_ids)))
    except (KeyError, TypeError, ValueError) as error:
        raise ProtocolError(f"malformed /generate result for {request.rid!r}: {error!r} in {str(data)[:200]}") from None
    if reason not in ("stop", "length", "abort"):
        raise ProtocolError(f"/generate result for {request.rid!r} has finish_reason {finish!r}; expected a final one")
    logprobs = None
    if request.return_logprobs:
        pairs = logprob_pairs(meta)
        if [tok for _, tok in pairs] != list(ids):
            raise ProtocolError(f"output_token_logprobs of {request.rid!r} do not match its output_ids")
        logprobs = tuple(lp for lp, _ in pairs)
    try:
        return GenerateOutput(request.rid, ids, logprobs, reason, version, prompt_len, spans)
    except InvalidRequestError as error:
        raise ProtocolError(f"inconsistent /generate result for {request.rid!r}: {error}") from None
