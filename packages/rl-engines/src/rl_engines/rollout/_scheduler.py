"""`Scheduler`: `HFEngine`'s continuous batching. One thread owns the running batch; submitted requests queue and
join it between decoding steps as others finish, their KV rows added to the batch's cache (finished rows' slots
are dropped), so a long response no longer holds a whole batch.

Each iteration: admit waiting requests (prefill them and add their rows, up to `max_batch_size`), sample one token
for every row, end rows that stopped, hand tokens to callbacks, pass the gate's checkpoint (aborts; parking under
`pause("keep")`), resolve finished requests' futures, then run one decode step. Requests joining at once share one
prefill, so a batch submitted together (`generate`) starts and ends together as before. Joining needs the fast
decoder's cache (`FastStep.extend`); a model decoding through transformers' forward admits new requests when its
running batch has drained (batch at a time).

Partial rollouts: when the weights changed while requests were parked (`pause("keep")`, an update, `resume`), the
cache of every parked row is recomputed from its prompt and the tokens it has, with the new weights, before it
continues: its later tokens are what the new weights produce from that prefix, and `version_spans` labels each
token with the version that produced it (recompute costs one prefill of the rows; bench/README.md has the figures).
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures
import logging
import threading
import weakref
from collections.abc import Sequence

import torch

from rl_engines.rollout._decode_step import FastStep
from rl_engines.rollout._errors import EngineShutdownError, RolloutError
from rl_engines.rollout._gate import RequestGate, Ticket
from rl_engines.rollout._hf_generation import DecodeSetup, PrefillCache, prefill
from rl_engines.rollout._running_batch import Entry, RunningBatch
from rl_engines.rollout._sampling import BatchSampler
from rl_engines.rollout._submit import aborted_output

logger = logging.getLogger(__name__)

EXIT_JOIN_S = 5.0
"""How long interpreter exit waits for a scheduler thread to stop (one decode step at most)."""


def _stop_at_exit(ref: weakref.ref) -> None:
    """Stop a scheduler still running at interpreter exit, so its thread does not die inside a torch call."""
    scheduler = ref()
    if scheduler is not None:
        scheduler.stop(EXIT_JOIN_S)


def _resolve(future: concurrent.futures.Future, value: object, error: BaseException | None = None) -> None:
    """Set a future's result (or error) unless its caller cancelled it."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
    except concurrent.futures.InvalidStateError:
        pass


class Scheduler:
    """See the module doc. `HFEngine` owns one; every method but the loop is thread-safe."""

    def __init__(self, setup: DecodeSetup, gate: RequestGate, cache: PrefillCache, max_batch_size: int) -> None:
        self._setup, self._gate, self._cache, self._max = setup, gate, cache, max_batch_size
        self._cond = threading.Condition()
        self._waiting: collections.deque[Entry] = collections.deque()
        self._admitting: list[Entry] = []
        self._batch: RunningBatch | None = None
        self._ticket: Ticket | None = None
        self._stopped = False
        self._logits: torch.Tensor | None = None
        self._version = gate.version
        self._epoch = setup.weights_epoch()
        self.recomputed_rows = 0
        """Rows whose KV cache was recomputed after a weight update (partial rollouts)."""
        self._thread = threading.Thread(target=self._loop, name="hf-scheduler", daemon=True)
        self._thread.start()
        atexit.register(_stop_at_exit, weakref.ref(self))

    # ---- any thread ------------------------------------------------------------------------------------
    def submit(self, entries: Sequence[Entry]) -> None:
        """Queue `entries` together (they are admitted together when there is room)."""
        with self._cond:
            if self._stopped:
                for entry in entries:
                    _resolve(entry.future, None, EngineShutdownError("the engine was shut down; build a new one"))
                return
            self._waiting.extend(entries)
            self._cond.notify_all()

    def cancel(self, rids: Sequence[str] | None) -> None:
        """End requests `rids` (None: all) with "abort": queued ones at once with no tokens, running ones at the next
        step boundary (a parked one when generation resumes)."""
        with self._cond:
            hit = [e for e in self._waiting if rids is None or e.request.rid in rids]
            for entry in hit:
                self._waiting.remove(entry)
        for entry in hit:
            _resolve(entry.future, aborted_output(entry.request, self._gate.version))
        self._gate.abort(None if rids is None else list(rids))

    def in_flight(self) -> int:
        """Requests admitted and not yet finished."""
        with self._cond:
            return len(self._admitting) + (len(self._batch) if self._batch is not None else 0)

    def stop(self, timeout_s: float) -> None:
        """Fail queued requests with `EngineShutdownError`; running ones end "abort" (the gate is stopped first)."""
        with self._cond:
            self._stopped = True
            queued = list(self._waiting)
            self._waiting.clear()
            self._cond.notify_all()
        for entry in queued:
            _resolve(entry.future, None, EngineShutdownError("the engine was shut down; build a new one"))
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)

    # ---- the scheduler thread --------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and not self._waiting and self._batch is None:
                    self._cond.wait()
                if self._stopped and self._batch is None:
                    return
            try:
                with torch.inference_mode():
                    if self._batch is None:
                        self._start()
                    else:
                        self._join()
                    if self._batch is not None:
                        self._advance()
            except Exception as error:  # a model or device error: fail what runs, keep serving
                logger.exception("decoding failed; failing the running requests")
                self._fail_running(error)

    def _take(self, limit: int) -> list[Entry]:
        with self._cond:
            taken = [self._waiting.popleft() for _ in range(min(limit, len(self._waiting)))]
            self._admitting = taken
            return taken

    def _fail(self, entries: Sequence[Entry], error: BaseException) -> None:
        for entry in entries:
            _resolve(entry.future, None, error)

    def _fail_running(self, error: BaseException) -> None:
        with self._cond:
            entries = list(self._admitting) + (self._batch.entries if self._batch is not None else [])
            self._admitting, self._batch, self._logits = [], None, None
        self._fail(entries, error)
        if self._ticket is not None:
            self._gate.release(self._ticket)
            self._ticket = None

    def _prefill(self, entries: Sequence[Entry]) -> tuple:
        key = tuple(e.request.input_ids for e in entries)
        state = self._cache.get(key, self._setup.weights_epoch())
        if state is None:
            state = prefill(self._setup, key)
            self._cache.put(key, self._setup.weights_epoch(), state)
        return state

    def _start(self) -> None:
        """Admit a new batch (waits while the engine is paused or updating)."""
        entries = self._take(self._max)
        if not entries:
            return
        try:
            self._ticket = self._gate.admit(e.request.rid for e in entries)
        except RolloutError as error:
            with self._cond:
                self._admitting = []
            self._fail(entries, error)
            return
        with self._setup.step_lock:
            self._version, self._epoch = self._gate.version, self._setup.weights_epoch()
            cache, logits, mask, last = self._prefill(entries)
            width = mask.shape[-1]
            step = self._setup.step_for(cache, mask, last, width + max(e.budget for e in entries))
        sampler = BatchSampler([e.request.sampling for e in entries], self._setup.device, self._setup.shared_generator)
        batch = RunningBatch(step, sampler, self._setup.device, self._setup.eos_ids)
        for entry in entries:
            entry.kv_start = width - len(entry.request.input_ids)
        batch.add(entries)
        with self._cond:
            self._batch, self._admitting, self._logits = batch, [], logits

    def _join(self) -> None:
        """Add waiting requests to the running batch, when it has room and the engine admits."""
        batch = self._batch
        step = batch.step if batch is not None else None
        if batch is None or not isinstance(step, FastStep) or not self._waiting or self._ticket is None:
            return
        entries = self._take(self._max - len(batch))
        if not entries:
            return
        try:
            admitted = self._gate.join(self._ticket, [e.request.rid for e in entries])
        except RolloutError as error:
            with self._cond:
                self._admitting = []
            self._fail(entries, error)
            return
        if not admitted:  # paused or updating: they wait for the next chance
            with self._cond:
                self._waiting.extendleft(reversed(entries))
                self._admitting = []
            return
        with self._setup.step_lock:
            cache, logits, mask, last = self._prefill(entries)
            shift = step.extend(cache, mask, last, step.width + max(e.budget for e in entries))
        if shift:
            for entry in batch.entries:
                entry.kv_start += shift
        for entry in entries:
            entry.kv_start = step.width - len(entry.request.input_ids)
        batch.sampler.extend([e.request.sampling for e in entries])
        batch.add(entries)
        step.set_capacity(step.width + max(e.joined + e.budget - batch.steps for e in batch.entries))
        with self._cond:
            self._admitting = []
            self._logits = logits if self._logits is None else torch.cat([self._logits, logits])

    def _advance(self) -> None:
        """Sample a token for every row, retire finished rows, and compute the next logits."""
        batch, ticket, logits = self._batch, self._ticket, self._logits
        if batch is None or ticket is None or logits is None:
            return
        tokens, logprobs = batch.sampler(logits)
        for row, stopped in batch.record(tokens, logprobs, self._version):
            batch.entries[row].finish = "stop" if stopped else "length"
        if batch.has_callbacks:
            batch.callbacks(tokens, logprobs)
        aborted = self._gate.checkpoint(ticket)  # parks here under pause("keep")
        if aborted is None or aborted:
            for entry in batch.entries:
                if entry.finish is None and (aborted is None or entry.request.rid in aborted):
                    entry.finish = "abort"
        done = [row for row, entry in enumerate(batch.entries) if entry.finish is not None]
        if done:
            outputs = [(batch.entries[row], batch.output(row, self._gate.version)) for row in done]
            self._gate.leave(ticket, [entry.request.rid for entry, _ in outputs])
            keep = [row for row, entry in enumerate(batch.entries) if entry.finish is None]
            if keep:
                tokens = batch.keep(batch.compaction_order(keep, done), tokens)
            with self._cond:
                if not keep:
                    self._batch, self._logits = None, None
            for entry, output in outputs:
                _resolve(entry.future, output)
            if not keep:
                self._gate.release(ticket)
                self._ticket = None
                return
        if self._setup.weights_epoch() != self._epoch:
            self._recompute(batch)
            return
        with self._setup.step_lock:
            self._version = self._gate.version
            self._logits = batch.step(tokens)

    def _recompute(self, batch: RunningBatch) -> None:
        """The weights changed while the rows were parked: rebuild their cache from prompt + tokens so far."""
        sequences = [tuple(batch.sequence(row)) for row in range(len(batch))]
        with self._setup.step_lock:
            self._version, self._epoch = self._gate.version, self._setup.weights_epoch()
            cache, logits, mask, last = prefill(self._setup, sequences)
            width = mask.shape[-1]
            remaining = max(e.joined + e.budget - batch.steps for e in batch.entries)
            batch.step = self._setup.step_for(cache, mask, last, width + remaining)
        for entry, sequence in zip(batch.entries, sequences, strict=True):
            entry.kv_start = width - len(sequence)
        self.recomputed_rows += len(sequences)
        logger.info("recomputed the KV cache of %d parked requests after a weight update", len(sequences))
        self._logits = logits
