"""The state a conformance check works with: one engine, the tiny models, references and sync helpers."""

from __future__ import annotations

import threading
import unittest
from dataclasses import dataclass, field
from pathlib import Path

import torch

from rl_engines.rollout import GenerateOutput, GenerateRequest, InferenceEngine, PauseMode, SamplingParams
from rl_engines.sync import (
    BroadcastTransport,
    DiskTransport,
    ReferenceTransport,
    SharedMemoryTransport,
    SyncReport,
    WeightSync,
    WeightSyncConfig,
    WeightTransport,
    as_buckets,
)
from rl_engines.testing._models import V1, ConformanceModels, greedy_mismatch, reference_greedy

TRANSPORT_CAPABILITY = {"reference": "tensor", "shared_memory": "tensor", "disk": "disk", "broadcast": "distributed"}
"""Each transport the suite exercises and the engine capability it needs."""
BUCKET_BYTES = 64 * 1024
"""Small buckets, so every sync of the tiny model spans several of them."""


def expect(condition: bool, message: str) -> None:
    """Raise AssertionError with `message` unless `condition` (asserts that survive `python -O`)."""
    if not condition:
        raise AssertionError(message)


@dataclass
class Harness:
    """An engine under test plus everything the checks share."""

    engine: InferenceEngine
    models: ConformanceModels
    workdir: Path
    logprob_atol: float = 1e-4
    tie_tol: float = 1e-3
    timeout_s: float = 60.0
    _references: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def require(self, *capabilities: str) -> None:
        """Skip the check unless the engine has every capability."""
        missing = [c for c in capabilities if c not in self.engine.capabilities]
        if missing:
            raise unittest.SkipTest(f"engine lacks capabilities {missing}")

    def transports(self) -> list[str]:
        """The transports the engine's capabilities allow."""
        return [name for name, cap in TRANSPORT_CAPABILITY.items() if cap in self.engine.capabilities]

    @staticmethod
    def request(rid: str, prompt: list[int], max_new_tokens: int, **sampling: object) -> GenerateRequest:
        """A request that ignores EOS (the tiny models have none), greedy unless `temperature` is given."""
        params = {"temperature": 0.0, "ignore_eos": True, **sampling}
        return GenerateRequest(rid, tuple(prompt), SamplingParams(max_new_tokens=max_new_tokens, **params))

    def greedy(self, prompts: list[list[int]], max_new_tokens: int, prefix: str = "g") -> list[GenerateOutput]:
        """Greedy outputs of one generate call over `prompts`."""
        requests = [self.request(f"{prefix}{i}", p, max_new_tokens) for i, p in enumerate(prompts)]
        return self.engine.generate(requests)

    def reference(self, version: int, prompt: list[int], max_new_tokens: int) -> tuple[list[int], list[float]]:
        """HF greedy reference (ids, margins) under the v1 (`V1`) or v2 (`V2`) weights; cached."""
        key = (version, tuple(prompt), max_new_tokens)
        with self._lock:
            if key not in self._references:
                model = self.models.v1 if version == V1 else self.models.v2
                self._references[key] = reference_greedy(model, prompt, max_new_tokens)
            return self._references[key]

    def expect_greedy(self, outputs: list[GenerateOutput], prompts: list[list[int]], version: int, what: str) -> None:
        """Every output equals the HF greedy reference under `version` (up to near-ties)."""
        for output, prompt in zip(outputs, prompts, strict=True):
            ids, margins = self.reference(version, prompt, len(output.output_ids))
            problem = greedy_mismatch(list(output.output_ids), ids, margins, self.tie_tol)
            expect(problem is None, f"{what}: request {output.rid} differs from the HF {version} reference: {problem}")

    def transport(self, name: str) -> WeightTransport:
        """A fresh transport of kind `name`."""
        if name == "reference":
            return ReferenceTransport()
        if name == "shared_memory":
            return SharedMemoryTransport()
        if name == "disk":
            return DiskTransport(self.workdir / "disk", keep_last=1)
        return BroadcastTransport(timeout_s=self.timeout_s)

    def sync(
        self,
        state: dict[str, torch.Tensor],
        version: int,
        transport: str,
        names: list[str] | None = None,
        pause_mode: PauseMode = "abort",
    ) -> SyncReport:
        """Run `WeightSync` with `transport` to send `state` (restricted to `names`) labelled `version`."""
        selected = sorted(state) if names is None else names
        config = WeightSyncConfig(timeout_s=self.timeout_s, pause_mode=pause_mode)
        sync = WeightSync([self.engine], self.transport(transport), config)
        try:
            return sync.sync(as_buckets(((n, state[n]) for n in selected), BUCKET_BYTES), version)
        finally:
            sync.close()

    def reset(self) -> None:
        """Bring the engine back to serving v1 as version V1, whatever a previous check left behind."""
        status = self.engine.status()
        if status.asleep:
            self.engine.wake_up()
        self.engine.resume()
        transport = "reference" if "tensor" in self.engine.capabilities else "disk"
        self.sync(self.models.state(V1), V1, transport)
