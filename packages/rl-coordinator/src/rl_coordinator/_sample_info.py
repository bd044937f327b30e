"""The metadata that travels through the coordinator in place of a sample's tensors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rl_coordinator._errors import CoordinatorInputError


@dataclass(frozen=True)
class SampleInfo:
    """What the coordinator knows of one sample: ids, token counts, provenance.

    Attributes:
        uid: unique id of the sample.
        group_id: id shared by samples of the same prompt (GRPO siblings).
        prompt_tokens: prompt length in tokens (>= 0).
        response_tokens: response length in tokens (>= 0); prompt + response must be > 0.
        policy_version: version of the policy weights that generated the response (>= 0).
        edge: key of the pipeline edge that produced the sample.
        source_dp_size: data-parallel size of the producing stage (>= 1).
        metadata: free-form, read-only extras (e.g. reward, task name).
    """

    uid: str
    group_id: int
    prompt_tokens: int
    response_tokens: int
    policy_version: int = 0
    edge: str = ""
    source_dp_size: int = 1
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.uid, str) or not self.uid:
            raise CoordinatorInputError(f"SampleInfo.uid must be a non-empty string, got {self.uid!r}")
        for name in ("prompt_tokens", "response_tokens", "policy_version"):  # not-a-sample-field: SampleInfo attributes
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise CoordinatorInputError(f"SampleInfo.{name} must be an int >= 0, got {value!r} (uid {self.uid})")
        if self.total_tokens == 0:
            raise CoordinatorInputError(f"SampleInfo for uid {self.uid} has zero tokens; a sample needs at least one")
        if not isinstance(self.source_dp_size, int) or self.source_dp_size < 1:
            raise CoordinatorInputError(f"SampleInfo.source_dp_size must be an int >= 1, got {self.source_dp_size!r}")
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

    @property
    def total_tokens(self) -> int:
        """Prompt plus response tokens."""
        return self.prompt_tokens + self.response_tokens

    def __reduce__(self) -> tuple[Any, ...]:
        # MappingProxyType does not pickle, and Ray ships SampleInfo between processes by the thousand: send
        # the field values (metadata as a dict, or None when empty) and rebuild without re-validating.
        return (
            _restore,
            (
                self.uid,
                self.group_id,
                self.prompt_tokens,
                self.response_tokens,
                self.policy_version,
                self.edge,
                self.source_dp_size,
                dict(self.metadata) if self.metadata else None,
            ),
        )


_EMPTY_METADATA: Mapping[str, Any] = MappingProxyType({})
"""Shared by every unpickled SampleInfo without metadata; read-only, so sharing it is safe."""


def _restore(
    uid: str,
    group_id: int,
    prompt_tokens: int,
    response_tokens: int,
    policy_version: int,
    edge: str,
    source_dp_size: int,
    metadata: dict[str, Any] | None,
) -> SampleInfo:
    """Unpickle a SampleInfo without running __post_init__: the values were checked when the original was built.

    Validation and the metadata copy were most of the cost of unpickling, paid again by every process the
    sample's description passes through (figures: bench/README.md, "Figures behind the docstrings").
    """
    info = object.__new__(SampleInfo)
    # A whole new __dict__ in one assignment (frozen: through object's setattr) is half the cost of update().
    object.__setattr__(
        info,
        "__dict__",
        {
            "uid": uid,  # not-a-sample-field: SampleInfo attribute
            "group_id": group_id,  # not-a-sample-field: SampleInfo attribute
            "prompt_tokens": prompt_tokens,
            "response_tokens": response_tokens,
            "policy_version": policy_version,  # not-a-sample-field: SampleInfo attribute
            "edge": edge,
            "source_dp_size": source_dp_size,
            "metadata": _EMPTY_METADATA if metadata is None else MappingProxyType(metadata),
        },
    )
    return info


def pack_infos(infos: list[SampleInfo]) -> tuple[list[Any], ...]:
    """The infos as one list per field (metadata as a dict, or None when empty), for `unpack_infos`.

    Requests and replies carry infos by the hundred, and Ray pickles them with cloudpickle, whose per-object
    hook dominated a SampleInfo's pickling cost; lists of plain values pickle far faster (figures:
    bench/README.md, "Figures behind the docstrings").
    """
    return (
        [info.uid for info in infos],
        [info.group_id for info in infos],
        [info.prompt_tokens for info in infos],
        [info.response_tokens for info in infos],
        [info.policy_version for info in infos],
        [info.edge for info in infos],
        [info.source_dp_size for info in infos],
        [dict(info.metadata) if info.metadata else None for info in infos],
    )


def unpack_infos(columns: tuple[list[Any], ...]) -> list[SampleInfo]:
    """The SampleInfos `pack_infos` packed, rebuilt without re-validation (see `_restore`)."""
    return list(map(_restore, *columns))
