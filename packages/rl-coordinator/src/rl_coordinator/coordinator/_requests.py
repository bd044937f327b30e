"""The shapes of coordinator requests and replies, and the checks that reject a bad request up front."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from rl_coordinator._errors import CoordinatorInputError
from rl_coordinator._sample_info import SampleInfo, pack_infos, unpack_infos
from rl_core import nearest_name
from rl_core.balancing import PARTITION_METHODS, WORKLOADS

SampleFilter = Callable[[SampleInfo], bool]
"""A predicate over SampleInfo; samples (or groups) it rejects are dropped. It is pickled to the coordinator
actor, so it must be picklable by cloudpickle (module-level functions, lambdas and closures over plain data)."""

DEFAULT_TIMEOUT_S = 600.0
"""How long a get waits for its step's samples by default: generous, since a rollout step can take minutes."""

DEFAULT_METHOD = "karmarkar_karp"
DEFAULT_WORKLOAD = "tokens"
MAX_SHARES_PER_ITEM = 16
"""Shares a stream item carries at most, by default. A stream item costs caller and coordinator a fixed round
trip, so a rank that falls behind catches up with the steps already partitioned in one item; the cap bounds how
many partitions the first share of an item waits behind (each costs a partitioning pass). 1 sends every share
alone, as a rank that keeps pace with its producers gets them anyway."""


class RefSelection(NamedTuple):
    """One rank's share of a step, by reference: three parallel lists, one entry per sample.

    Attributes:
        infos: the samples' descriptions.
        refs: the ObjectRef of the payload holding each sample; the samples of one send of a client share one
            ref (the batches of that send in one object, indexed as one sequence).
        positions: each sample's index inside its ref's payload (`payload[position]`), or None when the ref
            holds the sample alone.
    """

    infos: list[SampleInfo]
    refs: list[Any]
    positions: list[int | None]

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent by the hundred per step: the infos travel as columns (pack_infos).
        return _selection_from_columns, (pack_infos(self.infos), self.refs, self.positions)


def _selection_from_columns(
    columns: tuple[list[Any], ...], refs: list[Any], positions: list[int | None]
) -> RefSelection:
    return RefSelection(unpack_infos(columns), refs, positions)


@dataclass(frozen=True)
class StepSpec:
    """How a step's samples are selected and split; every rank of a step must send the same spec.

    Attributes:
        dp_size: number of consumer data-parallel ranks.
        batch_size: samples in the whole step, across ranks (a multiple of dp_size).
        balance: split by balanced workload (True) or contiguously in arrival order (False).
        group_aware: select whole groups only (samples sharing `group_id`) and keep each group on one rank
            when balancing.
        group_size: with group_aware, a group is selectable once it has exactly this many samples; None
            takes every pending sample of a group (producers then put a group in one call).
        method: partition method name (balancing.PARTITION_METHODS).
        workload: workload name (balancing.WORKLOADS).
        keep_batches: with balance (and not group_aware), keep each producer batch (samples sharing a payload
            ref) on as few ranks as balance allows: batches are cut into equal runs of gcd(batch sizes,
            samples per rank) samples, those are balanced whole, then single samples are exchanged between
            ranks while that lowers the heaviest load. A rank fetches every batch it holds a sample of, so it
            then fetches few payloads, for about the balance of sample-by-sample. False (or runs of one
            sample) balances samples one by one.
    """

    dp_size: int
    batch_size: int
    balance: bool = True
    group_aware: bool = False
    group_size: int | None = None
    method: str = DEFAULT_METHOD
    workload: str = DEFAULT_WORKLOAD
    keep_batches: bool = True

    def __post_init__(self) -> None:
        _check_int("dp_size", self.dp_size, 1)
        _check_int("batch_size", self.batch_size, 1)
        if self.batch_size % self.dp_size:
            raise CoordinatorInputError(
                f"batch_size={self.batch_size} cannot be split across dp_size={self.dp_size} ranks; pass a "
                "multiple of dp_size (batch_size counts the samples of the whole step, across ranks)"
            )
        flags = {"balance": self.balance, "group_aware": self.group_aware, "keep_batches": self.keep_batches}
        bad = next((name for name, value in flags.items() if type(value) is not bool), None)
        if bad is not None:
            raise CoordinatorInputError(f"{bad} must be a bool, got {flags[bad]!r}")
        _check_name("method", self.method, PARTITION_METHODS)
        _check_name("workload", self.workload, WORKLOADS)
        if self.group_size is None:
            return
        _check_int("group_size", self.group_size, 1)
        if not self.group_aware:
            raise CoordinatorInputError("group_size needs group_aware=True; set it or leave group_size=None")
        if self.batch_size % self.group_size:
            raise CoordinatorInputError(
                f"batch_size={self.batch_size} is not a whole number of groups of group_size={self.group_size}; "
                "pass a multiple of group_size"
            )
        groups = self.batch_size // self.group_size
        if self.balance and groups % self.dp_size:
            raise CoordinatorInputError(
                f"{groups} groups of {self.group_size} cannot be kept whole on dp_size={self.dp_size} ranks with "
                "equal counts; make batch_size a multiple of group_size * dp_size or pass balance=False"
            )

    @property
    def per_rank(self) -> int:
        """Samples each rank receives."""
        return self.batch_size // self.dp_size


def _check_int(name: str, value: object, minimum: int) -> int:
    if type(value) is not int or value < minimum:
        raise CoordinatorInputError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def _check_name(name: str, value: object, registry: dict[str, Any]) -> None:
    if value not in registry:
        near = nearest_name(str(value), registry)
        hint = f" (did you mean {near!r}?)" if near else ""
        raise CoordinatorInputError(f"unknown {name} {value!r}{hint}; valid names: {', '.join(sorted(registry))}")


def check_edge(edge_key: object) -> str:
    """`edge_key` if it is a non-empty string, else CoordinatorInputError."""
    if not isinstance(edge_key, str) or not edge_key:
        raise CoordinatorInputError(f"edge_key must be a non-empty string, got {edge_key!r}")
    return edge_key


def check_step(step: object) -> int:
    """`step` if it is an int >= 0, else CoordinatorInputError."""
    return _check_int("step", step, 0)


def check_max_shares(max_shares_per_item: object) -> int:
    """`max_shares_per_item` if it is an int >= 1, else CoordinatorInputError."""
    return _check_int("max_shares_per_item", max_shares_per_item, 1)


def check_steps(steps: object) -> int | None:
    """`steps` if it is None (endless) or an int >= 1, else CoordinatorInputError."""
    return None if steps is None else _check_int("steps", steps, 1)


def check_read_request(request: object) -> ReadRequest:
    """`request` if it is a ReadRequest, else CoordinatorInputError saying how to build one."""
    if not isinstance(request, ReadRequest):
        raise CoordinatorInputError(
            f"request must be a ReadRequest, got {type(request).__name__}; build one with "
            "ReadRequest(edge_key, step, dp_rank, StepSpec(dp_size, batch_size))"
        )
    return request


def check_timeout(timeout_s: object) -> float:
    """`timeout_s` if it is a finite number of seconds > 0, else CoordinatorInputError."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s < math.inf:
        raise CoordinatorInputError(f"timeout_s must be a finite number of seconds > 0, got {timeout_s!r}")
    return timeout_s


@dataclass(frozen=True)
class ReadRequest:
    """One consumer rank's read of one step of an edge: what DataCoordinator.get and the client's gets take.

    Checked when built, so a malformed read fails in the caller before any call to the actor. The ranks of a
    step send the same `spec` and differ in `dp_rank`; a consumer loop changes `step` only.

    Attributes:
        edge_key: the edge to read, e.g. "rollout->actor_update".
        step: the consumer's step, an int >= 0; each (edge, step) is served once.
        dp_rank: this rank, in [0, spec.dp_size).
        spec: how the step's samples are selected and split (StepSpec); the same on every rank of the step.
        sample_filter: picklable predicate over SampleInfo; samples (groups) it rejects are dropped. The
            filter of the rank that opens the step applies.
        timeout_s: seconds to wait for the step's samples before CoordinatorTimeout; None takes the client's
            default (DEFAULT_TIMEOUT_S when sent to the actor directly).
        wait_for_edge: wait for an edge never put yet; False raises CoordinatorInputError at once.
    """

    edge_key: str
    step: int
    dp_rank: int
    spec: StepSpec
    sample_filter: SampleFilter | None = None
    timeout_s: float | None = None
    wait_for_edge: bool = True

    def __post_init__(self) -> None:
        check_edge(self.edge_key)
        check_step(self.step)
        if not isinstance(self.spec, StepSpec):
            raise CoordinatorInputError(
                f"spec must be a StepSpec, got {type(self.spec).__name__}; build one with StepSpec(dp_size, batch_size)"
            )
        dp_size = self.spec.dp_size
        if type(self.dp_rank) is not int or not 0 <= self.dp_rank < dp_size:
            raise CoordinatorInputError(
                f"dp_rank={self.dp_rank!r} is outside dp_size={dp_size}; pass a rank in [0, {dp_size - 1}]"
            )
        if self.sample_filter is not None and not callable(self.sample_filter):
            raise CoordinatorInputError(
                f"sample_filter must be a callable SampleInfo -> bool or None, got {self.sample_filter!r}"
            )
        if self.timeout_s is not None:
            check_timeout(self.timeout_s)
        if type(self.wait_for_edge) is not bool:
            raise CoordinatorInputError(f"wait_for_edge must be a bool, got {self.wait_for_edge!r}")

    @property
    def key(self) -> tuple[str, int]:
        """The (edge, step) cache key the read belongs to."""
        return self.edge_key, self.step

    def wait_s(self, default: float = DEFAULT_TIMEOUT_S) -> float:
        """The timeout to apply: `timeout_s`, or `default` when it is None."""
        return default if self.timeout_s is None else self.timeout_s


def check_put(edge_key: object, infos: object, refs: object, positions: object) -> int:
    """Reject a put whose lists are malformed; return the number of samples."""
    edge = check_edge(edge_key)
    if not isinstance(infos, list) or not infos:
        raise CoordinatorInputError(f"infos must be a non-empty list of SampleInfo, got {type(infos).__name__}")
    n = len(infos)
    bad = next((i for i, info in enumerate(infos) if not isinstance(info, SampleInfo)), None)
    if bad is not None:
        raise CoordinatorInputError(f"infos[{bad}] must be a SampleInfo, got {type(infos[bad]).__name__}")
    wrong_edge = next((info for info in infos if info.edge and info.edge != edge), None)
    if wrong_edge is not None:
        raise CoordinatorInputError(
            f"sample {wrong_edge.uid} says edge {wrong_edge.edge!r} but was put on edge {edge!r}; "
            "put it on its own edge"
        )
    if not isinstance(refs, list) or len(refs) != n:
        got = len(refs) if isinstance(refs, list) else type(refs).__name__
        raise CoordinatorInputError(f"refs must be a list with one ref per sample ({n}), got {got}")
    if positions is not None:
        if not isinstance(positions, list) or len(positions) != n:
            got = len(positions) if isinstance(positions, list) else type(positions).__name__
            raise CoordinatorInputError(f"positions must be None or a list of {n} ints >= 0, got {got}")
        bad = next((i for i, p in enumerate(positions) if type(p) is not int or p < 0), None)
        if bad is not None:
            raise CoordinatorInputError(f"positions[{bad}] must be an int >= 0, got {positions[bad]!r}")
    return n


@dataclass(frozen=True)
class PutRequest:
    """A producer's samples for an edge, by reference: what DataCoordinator.put takes.

    Checked when built, so a malformed put fails in the producer. `CoordinatorClient.put_batch` builds one per
    producer batch (one ref shared by the batch's samples, positions 0..n-1).

    Attributes:
        edge_key: the edge the samples go out on.
        infos: one SampleInfo per sample; uids unique among the edge's pending samples.
        refs: one ray.ObjectRef per sample, inside this list (so Ray passes the refs, not the values); samples
            put in one `ray.put` share the same ref (sent once).
        positions: each sample's index inside its ref's payload, or None when each ref is one sample.
    """

    edge_key: str
    infos: list[SampleInfo]
    refs: list[Any]
    positions: list[int] | None = None

    def __post_init__(self) -> None:
        check_put(self.edge_key, self.infos, self.refs, self.positions)
        import ray  # only Ray's path puts; imported here so a torchrun process can use this module without Ray

        bad = next((i for i, ref in enumerate(self.refs) if not isinstance(ref, ray.ObjectRef)), None)
        if bad is not None:
            raise CoordinatorInputError(
                f"refs[{bad}] must be a ray.ObjectRef, got {type(self.refs[bad]).__name__}; ray.put the payload and "
                "pass its ref"
            )

    def __reduce__(self) -> tuple[Any, ...]:
        # A coalesced send carries hundreds of infos: they travel as columns (pack_infos).
        return _put_request_from_columns, (self.edge_key, pack_infos(self.infos), self.refs, self.positions)


def _put_request_from_columns(
    edge_key: str, columns: tuple[list[Any], ...], refs: list[Any], positions: list[int] | None
) -> PutRequest:
    # Checked when the producer built it and again by the coordinator's put, so not here as well.
    request = object.__new__(PutRequest)
    request.__dict__.update(edge_key=edge_key, infos=unpack_infos(columns), refs=refs, positions=positions)
    return request
