"""Generation on vLLM's `LLMEngine` by explicit steps, so requests can be aborted, drained or parked.

Every generate call adds its requests and then, in a loop, passes the gate's checkpoint and runs one engine
step under a shared lock. A step advances every running request (of all calls); its outputs go to per-request
mailboxes, each token labelled with the weight version current at that step. The engine must run in-process
(`VLLM_ENABLE_V1_MULTIPROCESSING=0`): then tokens are produced only inside `step()`, so a parked request
really stops and no token is computed under one version and reported under another.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rl_engines.rollout import (
    FinishReason,
    GenerateOutput,
    GenerateRequest,
    RequestGate,
    Ticket,
    TokenCallback,
    VersionSpan,
)

_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length", "abort": "abort"}


@dataclass
class _Row:
    request: GenerateRequest
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    finish: FinishReason | None = None


def _logprob(entry: Any, token: int) -> float:
    """The sampled token's log-prob from one position of vLLM's `logprobs` (dict or flat container)."""
    value = entry[token]
    return float(getattr(value, "logprob", value))


def _spans(versions: list[int]) -> tuple[VersionSpan, ...]:
    spans: list[VersionSpan] = []
    for i, version in enumerate(versions):
        if spans and spans[-1].version == version:
            spans[-1] = VersionSpan(version, spans[-1].start, i + 1)
        else:
            spans.append(VersionSpan(version, i, i + 1))
    return tuple(spans)


class StepLoop:
    """Shares one `LLMEngine` between concurrent generate calls; see the module doc."""

    def __init__(self, llm_engine: Any, gate: RequestGate, make_params: Any) -> None:
        self.engine = llm_engine
        self.gate = gate
        self.make_params = make_params
        self.lock = threading.RLock()
        """Held for every engine step and every weight or cache operation."""
        self._mailbox: dict[str, list[tuple[list[int], list[float], str | None, int]]] = {}
        self._ids = itertools.count()

    def _step(self) -> None:
        with self.lock:
            version = self.gate.version
            for out in self.engine.step():
                completion = out.outputs[0]
                tokens = [int(t) for t in completion.token_ids]
                entries = completion.logprobs or []
                logprobs = [_logprob(e, t) for e, t in zip(entries, tokens, strict=False)]
                finish = completion.finish_reason if out.finished else None
                self._mailbox.setdefault(out.request_id, []).append((tokens, logprobs, finish, version))

    def _abort(self, ids: Sequence[str]) -> None:
        with self.lock:
            self.engine.abort_request(list(ids))
            for internal in ids:
                self._mailbox.pop(internal, None)

    def run(self, requests: Sequence[GenerateRequest], ticket: Ticket, on_tokens: TokenCallback | None) -> list:
        """Generate `requests` (already admitted under `ticket`) to completion or abort; outputs in order."""
        rows = {f"{r.rid}#{next(self._ids)}": _Row(r) for r in requests}
        with self.lock:
            for internal, row in rows.items():
                prompt = {"prompt_token_ids": list(row.request.input_ids)}
                self.engine.add_request(internal, prompt, self.make_params(row.request))
        try:
            while any(row.finish is None for row in rows.values()):
                aborted = self.gate.checkpoint(ticket)
                stop = [
                    i
                    for i, row in rows.items()
                    if row.finish is None and (aborted is None or row.request.rid in aborted)
                ]
                if stop:
                    self._abort(stop)
                    for internal in stop:
                        rows[internal].finish = "abort"
                    continue
                self._step()
                self._deliver(rows, on_tokens)
        finally:
            unfinished = [i for i, row in rows.items() if row.finish is None]
            if unfinished:
                self._abort(unfinished)
        return [self._output(row) for row in rows.values()]

    def _deliver(self, rows: dict[str, _Row], on_tokens: TokenCallback | None) -> None:
        events = []
        with self.lock:
            pending = {i: self._mailbox.pop(i) for i in rows if i in self._mailbox}
        for internal, items in pending.items():
            row = rows[internal]
            for tokens, logprobs, finish, version in items:
                row.tokens += tokens
                row.logprobs += logprobs
                row.versions += [version] * len(tokens)
                events += [(row.request.rid, t, lp) for t, lp in zip(tokens, logprobs, strict=False)]
                if finish is not None:
                    row.finish = _FINISH.get(finish, "stop")
        if on_tokens is not None and events:
            on_tokens(events)

    def _output(self, row: _Row) -> GenerateOutput:
        logprobs = tuple(row.logprobs) if row.request.return_logprobs else None
        return GenerateOutput(
            rid=row.request.rid,
            output_ids=tuple(row.tokens),
            output_logprobs=logprobs,
            finish_reason=row.finish or "abort",
            weight_version=row.versions[-1] if row.versions else self.gate.version,
            prompt_len=len(row.request.input_ids),
            version_spans=_spans(row.versions),
        )
