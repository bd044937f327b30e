"""What asynchronous training (`algorithm.max_staleness` > 0) reports about the batch an actor update trains on."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import torch

from rl_core.schema import POLICY_VERSION, UID
from rl_runtime.workers import StepDataError

UID_DIGEST_HEX_DIGITS = 13
"""The uid digest enters the metrics as the integer of its first 13 hex digits: exact in a float64."""


def uid_digest(uids: list[int]) -> float:
    """A metric that identifies a set of sample uids: the first 52 bits of SHA-256 over them, sorted (order-free)."""
    text = ",".join(str(uid) for uid in sorted(uids))
    return float(int(hashlib.sha256(text.encode()).hexdigest()[:UID_DIGEST_HEX_DIGITS], 16))


def staleness_metrics(batch: Mapping[str, torch.Tensor], trainer_version: int, max_staleness: int) -> dict[str, float]:
    """`async/staleness_mean`, `async/staleness_max` (trainer version minus each sample's `policy_version`),
    `async/num_trained_samples` and `async/uid_digest` (`uid_digest` of the batch's uids) of the batch a training step
    takes; a StepDataError when a sample is staler than `max_staleness` or from a version the trainer never made."""
    staleness = trainer_version - batch[POLICY_VERSION].to(torch.int64)
    worst, least = int(staleness.max()), int(staleness.min())
    if worst > max_staleness or least < 0:
        raise StepDataError(
            f"the batch holds samples {least}..{worst} policy versions behind the trainer's version {trainer_version}; "
            f"algorithm.max_staleness={max_staleness} allows 0..{max_staleness}: the rollout slots ran too far ahead"
        )
    return {
        "async/staleness_mean": float(staleness.double().mean()),
        "async/staleness_max": float(worst),
        "async/num_trained_samples": float(staleness.numel()),
        "async/uid_digest": uid_digest([int(uid) for uid in batch[UID].tolist()]),
    }
