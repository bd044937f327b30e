"""What the OpenAI routes record for training: every completion's tokens, log-probs and policy versions, by id."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rl_core.workflows import Completion

DEFAULT_CAPACITY = 4096
"""Records kept by a server's store; the oldest are dropped first (a long-lived server must not grow forever)."""


@dataclass(frozen=True)
class CompletionRecord:
    """One `/v1/chat/completions` or `/v1/completions` answer as training needs it.

    `prompt_ids` is the exact context the engine was given; `choices[i]` holds choice i's sampled tokens with
    their behaviour log-probs and weight versions (`rl_core.workflows.Completion`, cut at a stop string when one
    matched). `messages` (chat only) are the request's messages as rendered and `replies[i]` the assistant message
    choice i answered with, so a later request can be matched against the conversation it extends.
    """

    id: str
    prompt_ids: tuple[int, ...]
    choices: tuple[Completion, ...]
    messages: tuple[Mapping[str, Any], ...] = ()
    replies: tuple[Mapping[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The record as the `rl` extension field and `GET /v1/rl/completions/{id}` carry it."""
        return {
            "id": self.id,
            "prompt_token_ids": list(self.prompt_ids),
            "choices": [
                {
                    "index": i,
                    "token_ids": list(c.token_ids),
                    "log_probs": list(c.log_probs),
                    "versions": list(c.versions),
                    "finish_reason": c.finish_reason,
                }
                for i, c in enumerate(self.choices)
            ],
        }


class CompletionStore:
    """Completion records by id, the newest `capacity` of them (thread-safe)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"CompletionStore capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._records: OrderedDict[str, CompletionRecord] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, record: CompletionRecord) -> None:
        """Keep `record`, dropping the oldest past `capacity`."""
        with self._lock:
            self._records[record.id] = record
            while len(self._records) > self.capacity:
                self._records.popitem(last=False)

    def get(self, completion_id: str) -> CompletionRecord | None:
        """The record of `completion_id`, or None when unknown or already dropped."""
        with self._lock:
            return self._records.get(completion_id)

    def records(self) -> list[CompletionRecord]:
        """Every record kept, oldest first."""
        with self._lock:
            return list(self._records.values())
