"""Plain-dict registries filled by decorators, with lookups that list the valid names."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import TypeVar

from rl_core._errors import DuplicateNameError, UnknownNameError

T = TypeVar("T")


def nearest_name(name: str, candidates: list[str] | tuple[str, ...] | Mapping[str, object]) -> str | None:
    """Return the candidate closest to `name` by edit similarity, or None when nothing is close."""
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.5)
    return matches[0] if matches else None


def registrar(registry: dict[str, T], kind: str) -> Callable[[str], Callable[[T], T]]:
    """Make the decorator that adds an entry to `registry` under a name.

    `kind` is the human name of the registry ("advantage estimator") used in error messages.
    Registering a name twice raises `DuplicateNameError` rather than silently replacing it.
    """

    def register(name: str) -> Callable[[T], T]:
        def decorate(entry: T) -> T:
            if name in registry:
                raise DuplicateNameError(
                    f"{kind} {name!r} is already registered ({registry[name]!r}); pick another name"
                )
            registry[name] = entry
            return entry

        return decorate

    return register


def lookup(registry: Mapping[str, T], name: str, kind: str) -> T:
    """Return `registry[name]`, or raise `UnknownNameError` naming the valid names and the nearest one."""
    try:
        return registry[name]
    except KeyError:
        valid = ", ".join(sorted(registry))
        near = nearest_name(name, registry)
        hint = f" (did you mean {near!r}?)" if near else ""
        raise UnknownNameError(f"unknown {kind} {name!r}{hint}; valid names: {valid}") from None
