"""The errors DAG workers raise: unbound operations, bad routing, a node that failed, a worker that died or hung."""

from __future__ import annotations

from rl_runtime._errors import RLRuntimeError


class WorkerError(RLRuntimeError):
    """Base class of the DAG-worker errors."""


class UnknownOperationError(WorkerError, ValueError):
    """A graph node names an operation nobody registered; raised before any step runs."""


class RoutingError(WorkerError, ValueError):
    """An edge between nodes cannot be routed as asked (e.g. a coordinator edge without a batch size)."""


class StepDataError(WorkerError, ValueError):
    """A StepData is malformed, or an operation returned something that is not a StepData."""


class NodeExecutionError(WorkerError, RuntimeError):
    """A node's operation raised; carries the worker rank, the node id, the step and the original traceback."""

    def __init__(self, rank: int, node_id: str, step: int, traceback_text: str) -> None:
        self.rank = rank
        self.node_id = node_id
        self.step = step
        self.traceback_text = traceback_text
        super().__init__(
            f"node {node_id!r} failed on worker rank {rank} at step {step}; original traceback:\n{traceback_text}"
        )

    def __reduce__(self) -> tuple[type[NodeExecutionError], tuple[int, str, int, str]]:
        # Ray pickles the exception back to the driver; the default reduce would pass the message as `rank`.
        return (type(self), (self.rank, self.node_id, self.step, self.traceback_text))


class WorkerLostError(WorkerError, RuntimeError):
    """A worker process died (or stopped answering) while the driver waited for its step."""

    def __init__(self, rank: int, step: int, reason: str) -> None:
        self.rank = rank
        self.step = step
        self.reason = reason
        super().__init__(f"worker rank {rank} was lost during step {step}: {reason}")

    def __reduce__(self) -> tuple[type[WorkerLostError], tuple[int, int, str]]:
        return (type(self), (self.rank, self.step, self.reason))


class RankFailedError(WorkerError, RuntimeError):
    """Under torchrun, another rank failed first: this rank stops with the failed rank's own report (its rank, host,
    node or action, and exception), not with the broken collective it was waiting in."""

    def __init__(self, report: str, failed_rank: int, rank: int) -> None:
        self.report = report
        self.failed_rank = failed_rank
        self.rank = rank
        super().__init__(f"{report}; rank {rank} stopped with it")

    def __reduce__(self) -> tuple[type[RankFailedError], tuple[str, int, int]]:
        return (type(self), (self.report, self.failed_rank, self.rank))


class StepTimeoutError(WorkerError, TimeoutError):
    """Workers still alive did not finish a step within the driver's timeout."""


class WorkerStartError(WorkerError, RuntimeError):
    """A worker actor could not be built (its resources factory or its operation binding raised)."""
