"""Reading a share's samples straight from the producers' objects."""

from __future__ import annotations

from typing import Any

import ray

from rl_coordinator.coordinator._requests import RefSelection


def fetch_payloads(selection: RefSelection, *, timeout_s: float | None = None) -> list[Any]:
    """The samples of a selection, in its order: one `ray.get` over the distinct refs, then indexing.

    A ref holding a batch (or a client's bundle of batches) is fetched once however many of its samples the
    selection has; sample i is `payload[positions[i]]`, or the payload itself when its position is None.
    """
    distinct: dict[Any, int] = {}
    for ref in selection.refs:
        distinct.setdefault(ref, len(distinct))
    payloads = ray.get(list(distinct), timeout=timeout_s)
    return [
        payloads[distinct[ref]] if pos is None else payloads[distinct[ref]][pos]
        for ref, pos in zip(selection.refs, selection.positions, strict=True)
    ]
