"""`RemoteEngine`: the `InferenceEngine` protocol over SGLang's native HTTP API (our server or SGLang itself).

Methods map to endpoints one to one (`generate` -> `/generate`, `pause` -> `/pause_generation`, ...). Every
call carries a timeout and a failure arrives as the typed error the engine raised on the server. Against a
real SGLang server, `pause("wait")` and `weights_checksum` are not available (ours adds them), and a
`SharedTensorBucket` cannot be sent (send named tensors: they travel as CUDA IPC / shared-memory handles).
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import os
import threading
import time
from collections.abc import Collection, Sequence
from typing import Any, Literal

from rl_engines.remote._config import SGLANG_CAPABILITIES, RemoteEngineConfig
from rl_engines.remote._errors import ProtocolError
from rl_engines.remote._http import HttpClient
from rl_engines.remote._wire_generate import generate_payload, logprob_pairs, output_from_json
from rl_engines.remote._wire_tensors import serialize_named_tensors
from rl_engines.rollout import (
    DEFAULT_GROUP_NAME,
    EngineShutdownError,
    EngineStateError,
    EngineStatus,
    EngineTimeoutError,
    GenerateOutput,
    GenerateRequest,
    InvalidRequestError,
    LogprobMode,
    NamedTensors,
    PauseMode,
    RolloutError,
    SharedTensorBucket,
    TokenCallback,
    WeightGroupSpec,
    WeightsMeta,
    check_requests,
)
from rl_engines.rollout._submit import RequestThreads, agenerate_by_submit, failed_future
from rl_engines.rollout._types import check_weight_version, weight_version_from_wire, weight_version_to_wire

logger = logging.getLogger(__name__)


def _version_from_wire(label: Any, where: str) -> int:
    """The int policy version a server answered as SGLang's str (`"3"`); `ProtocolError` if it spells none."""
    try:
        return weight_version_from_wire(label, f"{where}: weight_version")
    except InvalidRequestError as error:
        raise ProtocolError(str(error)) from None


_SGLANG_PAUSE_MODE = {"abort": "abort", "wait": "wait", "keep": "in_place"}
"""Our pause modes in SGLang's names ("wait" exists only on our server)."""
_ABORT_RETRY_S = 0.2
"""How often `cancel` repeats its `/abort_request` while the request runs: the server may not have registered the
request yet when the first one arrives (it then answers as for an unknown rid)."""
_MARGIN_S = 30.0
"""Extra HTTP time beyond a server-side timeout, so the server's own timeout error arrives first."""


class RemoteEngine:
    """An `InferenceEngine` served over HTTP at `config.base_url`; see the module doc."""

    def __init__(self, config: RemoteEngineConfig) -> None:
        self.config = config
        self._http = HttpClient(config)
        self._closed = False
        self._lock = threading.Condition()
        self._in_flight: dict[str, int] = {}
        self._group_name: str | None = None
        try:
            info = self._http.get("/model_info", timeout_s=config.timeout_s)
            if not isinstance(info, dict):
                raise ProtocolError(f"/model_info answered {str(info)[:200]!r}, expected a JSON object")
        except BaseException:
            self._http.close()  # a refused connect (wrong key, wrong server) must not leak the pool's sockets
            raise
        self.model_info: dict[str, Any] = info
        self._extended = "capabilities" in info
        """Our server (as opposed to SGLang): it has /engine_status, /weights_checksum and pause "wait"."""
        # The served engine's calls may bound themselves in its own process; over HTTP they are this client's calls.
        served = frozenset(info["capabilities"]) - {"bounded_calls"} if self._extended else SGLANG_CAPABILITIES
        self._capabilities = config.capabilities if config.capabilities is not None else served
        self._logprob_mode: LogprobMode = info.get("logprob_mode", "temperature")
        self._threads = RequestThreads(
            self._run_one,
            self.abort,
            self.weight_version,
            max_workers=config.max_connections,
            name="remote-submit",
            abort_retry_s=_ABORT_RETRY_S,
        )

    @classmethod
    def from_config(cls, config: RemoteEngineConfig) -> RemoteEngine:
        """Connect to the server of `config` (it must be up: `/model_info` is read now)."""
        return cls(config)

    @property
    def capabilities(self) -> frozenset[str]:
        """The server's capabilities (or `config.capabilities`)."""
        return self._capabilities

    @property
    def logprob_mode(self) -> LogprobMode:
        """The server's log-prob mode ("temperature" unless it says otherwise)."""
        return self._logprob_mode

    def _check_open(self) -> None:
        if self._closed:
            raise EngineShutdownError("this RemoteEngine was shut down; build a new one")

    # ---- generation ------------------------------------------------------------------------------
    def submit(
        self, request: GenerateRequest, *, on_tokens: TokenCallback | None = None
    ) -> concurrent.futures.Future[GenerateOutput]:
        """See `InferenceEngine.submit`: one `/generate` HTTP request per submit, sent from a pool thread (at most
        `config.max_connections` at once), streamed (SSE) when `on_tokens` is given."""
        try:
            self._check_open()
            check_requests([request])
        except Exception as error:
            return failed_future(error)
        return self._threads.submit(request, on_tokens)

    async def agenerate(self, request: GenerateRequest) -> GenerateOutput:
        """See `InferenceEngine.agenerate`."""
        return await agenerate_by_submit(self.submit, self.cancel, request)

    def cancel(self, rid: str) -> None:
        """See `InferenceEngine.cancel` (`/abort_request` for a request the server has; a submitted request not
        yet sent is answered "abort" without being sent)."""
        if self._closed:
            return
        if rid in self._threads.rids():
            self._threads.cancel(rid)
            return
        with self._lock:
            in_generate = rid in self._in_flight
        if in_generate:
            self.abort([rid])

    def _run_one(self, request: GenerateRequest, on_tokens: TokenCallback | None, _cancelled: object) -> GenerateOutput:
        return self.generate([request], on_tokens=on_tokens)[0]

    def generate(
        self, requests: Sequence[GenerateRequest], *, on_tokens: TokenCallback | None = None
    ) -> list[GenerateOutput]:
        """See `InferenceEngine.generate`: the whole batch in one `/generate` request (SGLang's batch form, one round
        trip: the same outputs as submitting each); with `on_tokens` the server streams (SSE) and tokens arrive per
        step."""
        self._check_open()
        batch = check_requests(requests)
        self._track(batch, +1)
        try:
            payload = generate_payload(batch, stream=on_tokens is not None)
            if on_tokens is None:
                results = self._http.post("/generate", payload, timeout_s=self.config.generate_timeout_s)
                if not isinstance(results, list) or len(results) != len(batch):
                    raise ProtocolError(f"/generate answered {str(results)[:200]!r} for {len(batch)} requests")
                outputs = [output_from_json(data, request) for data, request in zip(results, batch, strict=True)]
            else:
                outputs = self._generate_stream(batch, payload, on_tokens)
        finally:
            self._track(batch, -1)
        for output, request in zip(outputs, batch, strict=True):
            if output.rid != request.rid:
                raise ProtocolError(f"/generate answered rid {output.rid!r} for request {request.rid!r}")
        return outputs

    def _track(self, batch: list[GenerateRequest], delta: int) -> None:
        with self._lock:
            for request in batch:
                count = self._in_flight.get(request.rid, 0) + delta
                if count > 0:
                    self._in_flight[request.rid] = count
                else:
                    self._in_flight.pop(request.rid, None)
            self._lock.notify_all()

    def _generate_stream(
        self, batch: list[GenerateRequest], payload: dict[str, Any], on_tokens: TokenCallback
    ) -> list[GenerateOutput]:
        ids: list[list[int]] = [[] for _ in batch]
        logprobs: list[list[tuple[float, int]]] = [[] for _ in batch]
        finals: list[GenerateOutput | None] = [None] * len(batch)
        for event in self._http.stream("/generate", payload, timeout_s=self.config.generate_timeout_s):
            index = event.get("index", 0)
            if not isinstance(index, int) or not 0 <= index < len(batch):
                raise ProtocolError(f"stream event for index {index!r} in a batch of {len(batch)}")
            meta = event.get("meta_info") or {}
            chunk, pairs = [int(t) for t in event.get("output_ids") or ()], logprob_pairs(meta)
            if not self.config.incremental_stream:
                chunk, pairs = chunk[len(ids[index]) :], pairs[len(logprobs[index]) :]
            ids[index] += chunk
            logprobs[index] += pairs
            values = [lp for lp, _ in pairs] if pairs else [math.nan] * len(chunk)
            if chunk:
                on_tokens([(batch[index].rid, token, lp) for token, lp in zip(chunk, values, strict=True)])
            if meta.get("finish_reason") is not None:
                full = {**meta, "output_token_logprobs": [[lp, tok, None] for lp, tok in logprobs[index]]}
                finals[index] = output_from_json({"output_ids": ids[index], "meta_info": full}, batch[index])
        missing = [batch[i].rid for i, output in enumerate(finals) if output is None]
        if missing:
            raise ProtocolError(f"the /generate stream ended without finishing requests {missing[:5]}")
        return [output for output in finals if output is not None]

    # ---- pause, abort, memory --------------------------------------------------------------------
    def pause(self, mode: PauseMode = "abort", *, timeout_s: float | None = None) -> None:
        """See `InferenceEngine.pause` (`/pause_generation`; "keep" is SGLang's "in_place")."""
        self._check_open()
        if mode not in _SGLANG_PAUSE_MODE:
            raise InvalidRequestError(f"pause mode must be one of {sorted(_SGLANG_PAUSE_MODE)}, got {mode!r}")
        wait_s = self.config.timeout_s if timeout_s is None else timeout_s
        body = {"mode": _SGLANG_PAUSE_MODE[mode], "timeout_s": wait_s}
        self._http.post("/pause_generation", body, timeout_s=wait_s + _MARGIN_S)
        if mode == "wait":  # the server has finished them; also wait until their answers reached this client
            with self._lock:
                if not self._lock.wait_for(lambda: not self._in_flight, wait_s):
                    raise EngineTimeoutError(f"generate answers did not arrive within {wait_s} s of pause('wait')")

    def resume(self) -> None:
        """See `InferenceEngine.resume` (`/continue_generation`)."""
        self._check_open()
        self._http.post("/continue_generation", {}, timeout_s=self.config.timeout_s)

    def abort(self, rids: Collection[str] | None = None) -> None:
        """See `InferenceEngine.abort` (`/abort_request`, one call per rid)."""
        self._check_open()
        if rids is None:
            self._http.post("/abort_request", {"abort_all": True}, timeout_s=self.config.timeout_s)
            return
        for rid in rids:
            self._http.post("/abort_request", {"rid": rid, "abort_all": False}, timeout_s=self.config.timeout_s)

    def sleep(self, level: Literal[1, 2] = 1) -> None:
        """See `InferenceEngine.sleep` (`/release_memory_occupation`; `level` is our extension)."""
        self._check_open()
        body = {"tags": None, "level": level}
        self._http.post("/release_memory_occupation", body, timeout_s=self.config.timeout_s)

    def wake_up(self, tags: Collection[str] | None = None) -> None:
        """See `InferenceEngine.wake_up` (`/resume_memory_occupation`)."""
        self._check_open()
        body = {"tags": None if tags is None else list(tags)}
        self._http.post("/resume_memory_occupation", body, timeout_s=self.config.timeout_s)

    # ---- weights ---------------------------------------------------------------------------------
    def _strict(self) -> dict[str, Any]:
        """Our server's `require_version` extension: generation waits for `set_weight_version` after an update
        (the InferenceEngine contract) instead of moving the version on by one as SGLang does. Real SGLang
        refuses unknown fields, so it is sent to our server only."""
        return {"require_version": True} if self._extended else {}

    def update_weights_from_disk(self, path: str | os.PathLike[str]) -> None:
        """See `InferenceEngine.update_weights_from_disk`; `path` must be readable by the server."""
        self._check_open()
        body = {"model_path": os.fspath(path), "flush_cache": False, "abort_all_requests": False, **self._strict()}
        self._http.post("/update_weights_from_disk", body, timeout_s=self.config.update_timeout_s, weights=True)

    def update_weights_from_tensors(self, tensors: NamedTensors | SharedTensorBucket) -> frozenset[str]:
        """See `InferenceEngine.update_weights_from_tensors`: named tensors go as SGLang handle payloads
        (`serialized_named_tensors`), a `SharedTensorBucket` as its JSON description (our server only).
        Returns the lent buffers the server keeps as weights (`lent_buffers`; SGLang always copies)."""
        self._check_open()
        if isinstance(tensors, SharedTensorBucket):
            body: dict[str, Any] = {"shared_bucket": tensors.to_json(), "flush_cache": False, **self._strict()}
            answer = self._http.post(
                "/update_weights_from_tensor", body, timeout_s=self.config.update_timeout_s, weights=True
            )
            return frozenset(answer.get("lent_buffers") or ()) if isinstance(answer, dict) else frozenset()
        named = list(tensors)
        if not named:
            raise InvalidRequestError("update_weights_from_tensors got no tensors; send at least one")
        payloads = [serialize_named_tensors(named) for _ in range(self.config.tp_size)]
        body = {"serialized_named_tensors": payloads, "load_format": None, "flush_cache": False, **self._strict()}
        # `named` keeps the tensors (and so their shared memory) alive until the server has copied them.
        self._http.post("/update_weights_from_tensor", body, timeout_s=self.config.update_timeout_s, weights=True)
        return frozenset()

    def init_weights_update_group(self, spec: WeightGroupSpec) -> None:
        """See `InferenceEngine.init_weights_update_group`; the server joins at `spec.rank_offset`."""
        self._check_open()
        body = {
            "master_address": spec.master_address,
            "master_port": spec.master_port,
            "rank_offset": spec.rank_offset,
            "world_size": spec.world_size,
            "group_name": spec.group_name,
            "backend": spec.backend,
            "timeout_s": spec.timeout_s,
        }
        self._http.post("/init_weights_update_group", body, timeout_s=spec.timeout_s + _MARGIN_S, weights=True)
        self._group_name = spec.group_name

    def update_weights_from_distributed(self, meta: WeightsMeta) -> None:
        """See `InferenceEngine.update_weights_from_distributed`."""
        self._check_open()
        body = {
            "names": list(meta.names),
            "dtypes": list(meta.dtypes),
            "shapes": [list(s) for s in meta.shapes],
            "group_name": self._group_name or DEFAULT_GROUP_NAME,
            "flush_cache": False,
            **self._strict(),
        }
        self._http.post("/update_weights_from_distributed", body, timeout_s=self.config.update_timeout_s, weights=True)

    def destroy_weights_update_group(self) -> None:
        """See `InferenceEngine.destroy_weights_update_group`; a no-op without a group."""
        self._check_open()
        name, self._group_name = self._group_name, None
        if name is not None:
            self._http.post("/destroy_weights_update_group", {"group_name": name}, timeout_s=self.config.timeout_s)

    def flush_cache(self) -> None:
        """See `InferenceEngine.flush_cache`; retried while the server refuses because requests remain."""
        self._check_open()
        deadline = time.monotonic() + self.config.timeout_s
        while True:
            try:
                self._http.post("/flush_cache", {}, timeout_s=self.config.timeout_s)
                return
            except InvalidRequestError:
                if time.monotonic() + self.config.flush_retry_s > deadline:
                    raise
                time.sleep(self.config.flush_retry_s)

    def set_weight_version(self, version: int) -> None:
        """See `InferenceEngine.set_weight_version` (`/update_weight_version`, which takes the version as a str)."""
        self._check_open()
        check_weight_version(version, "weight version")
        body = {"new_version": weight_version_to_wire(version), "abort_all_requests": False}
        self._http.post("/update_weight_version", body, timeout_s=self.config.timeout_s)

    def weight_version(self) -> int:
        """See `InferenceEngine.weight_version` (`/get_weight_version`, which answers a str)."""
        self._check_open()
        label = self._http.get("/get_weight_version", timeout_s=self.config.timeout_s)["weight_version"]
        return _version_from_wire(label, "/get_weight_version")

    def weights_checksum(self, names: Collection[str] | None = None) -> str:
        """See `InferenceEngine.weights_checksum` (`/weights_checksum`, our server only)."""
        self._check_open()
        if not self._extended:
            raise EngineStateError(
                f"{self.config.base_url} has no /weights_checksum (SGLang does not); "
                "run WeightSync with WeightSyncConfig(verify=False)"
            )
        body = {"names": None if names is None else list(names)}
        return str(self._http.post("/weights_checksum", body, timeout_s=self.config.timeout_s)["checksum"])

    # ---- lifecycle -------------------------------------------------------------------------------
    def status(self) -> EngineStatus:
        """See `InferenceEngine.status` (`/engine_status` on our server; approximated against SGLang)."""
        self._check_open()
        if not self._extended:
            return EngineStatus("serving" if self.health() else "stopped", self.weight_version(), 0)
        data = self._http.get("/engine_status", timeout_s=self.config.timeout_s)
        return EngineStatus(
            state=data["state"],
            weight_version=_version_from_wire(data["weight_version"], "/engine_status"),
            in_flight=int(data["in_flight"]),
            pause_mode=data.get("pause_mode"),
            asleep=frozenset(data.get("asleep") or ()),
            weights_loaded=bool(data.get("weights_loaded", True)),
        )

    def health(self) -> bool:
        """True while the server answers `/health` with 200 and this client is open."""
        if self._closed:
            return False
        try:
            self._http.request("GET", "/health", timeout_s=self.config.health_timeout_s)
        except RolloutError:
            return False
        return True

    def shutdown(self) -> None:
        """Abort this client's in-flight requests on the server and close; the server keeps running."""
        if self._closed:
            return
        with self._lock:
            rids = list(self._in_flight)
        try:
            if rids:
                self.abort(rids)
        except RolloutError as error:
            logger.warning("could not abort %d in-flight requests at shutdown: %s", len(rids), error)
        finally:
            self._closed = True
            self._threads.shutdown()
            self._http.close()
