"""Helpers of the CoordinatorState tests: sample infos, one-batch puts, gets and a coroutine runner."""

from __future__ import annotations

import asyncio
from typing import Any

from rl_coordinator import SampleInfo
from rl_coordinator.coordinator import CoordinatorState, ReadRequest, RefSelection, StepSpec

SHORT_S = 0.05  # a timeout that expires quickly; nothing in these tests needs to wait longer


def info(uid: str, tokens: int = 10, group: int = 0) -> SampleInfo:
    return SampleInfo(uid=uid, group_id=group, prompt_tokens=1, response_tokens=tokens - 1)


def put(state: CoordinatorState, edge: str, *infos: SampleInfo) -> int:
    """Put infos as one producer batch: one shared fake ref, positions 0..n-1."""
    ref = f"ref-{infos[0].uid}"
    return state.put(edge, list(infos), [ref] * len(infos), list(range(len(infos))))


async def get(state: CoordinatorState, edge: str, step: int, rank: int, spec: StepSpec, **kw: Any) -> RefSelection:
    return await state.get(ReadRequest(edge, step, rank, spec, kw.get("sample_filter"), kw.get("timeout_s", 5.0)))


def uids(selection: RefSelection) -> list[str]:
    return [i.uid for i in selection.infos]


def run(coro: Any) -> Any:
    return asyncio.run(coro)
