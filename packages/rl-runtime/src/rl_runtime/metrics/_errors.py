"""The errors the metrics package raises: bad inputs to a metric function or sink, and a missing optional extra."""

from __future__ import annotations

from rl_runtime._errors import RLRuntimeError


class MetricsError(RLRuntimeError, ValueError):
    """A metric function or sink got an argument it cannot use; the message names it, what was expected and found."""


class MissingExtraError(RLRuntimeError, ImportError):
    """A sink needs an optional package that is not installed; the message names the pip extra that provides it."""


def missing_extra(sink: str, module: str, extra: str) -> MissingExtraError:
    """The error for sink `sink` whose package `module` is missing; `extra` is rl-runtime's extra providing it."""
    return MissingExtraError(
        f"the {sink!r} log sink needs the {module!r} package, which is not installed; "
        f"install it with `pip install 'rl-runtime[{extra}]'` or drop {sink!r} from trainer.log_sinks"
    )
