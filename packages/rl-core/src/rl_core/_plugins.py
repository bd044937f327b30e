"""Discovery of third-party registrations through Python entry points."""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

from rl_core._errors import RLCoreError

logger = logging.getLogger(__name__)

PLUGIN_GROUP = "rl_core.plugins"
"""Entry-point group whose targets register algorithms or pipelines when imported."""


class PluginError(RLCoreError, ImportError):
    """A plugin entry point failed to load; the message names the entry point and its distribution."""


def load_plugins(group: str = PLUGIN_GROUP) -> list[str]:
    """Import every entry point of `group` so its registration decorators run; return their names.

    A plugin registers by declaring, in its own pyproject.toml,
    ``[project.entry-points."rl_core.plugins"] my_algos = "my_pkg.algos"``.
    """
    loaded: list[str] = []
    for entry in entry_points(group=group):
        try:
            entry.load()
        except Exception as exc:
            dist = entry.dist.name if entry.dist is not None else "unknown distribution"
            raise PluginError(f"plugin {entry.name!r} ({entry.value}) from {dist} failed to load: {exc}") from exc
        logger.debug("loaded rl-core plugin %s from %s", entry.name, entry.value)
        loaded.append(entry.name)
    return loaded
