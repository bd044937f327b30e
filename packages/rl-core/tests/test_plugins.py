"""Entry-point plugins are imported so their registrations run; a broken one is named."""

from __future__ import annotations

import sys
import types
from importlib.metadata import EntryPoint

import pytest

from rl_core import PluginError, load_plugins
from rl_core import _plugins as plugins_module

GROUP = "rl_core.plugins"


def _install_module(monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> None:
    module = types.ModuleType(name)
    exec(source, module.__dict__)
    monkeypatch.setitem(sys.modules, name, module)


def _entry_points(monkeypatch: pytest.MonkeyPatch, *entries: EntryPoint) -> None:
    monkeypatch.setattr(plugins_module, "entry_points", lambda group: [e for e in entries if e.group == group])


def test_load_plugins_imports_each_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    registry: dict[str, int] = {}
    monkeypatch.setitem(sys.modules, "fake_registry_holder", types.SimpleNamespace(registry=registry))
    _install_module(
        monkeypatch, "fake_plugin_mod", "import fake_registry_holder\nfake_registry_holder.registry['x'] = 1"
    )
    _entry_points(monkeypatch, EntryPoint(name="fake", value="fake_plugin_mod", group=GROUP))

    assert load_plugins() == ["fake"]
    assert registry == {"x": 1}


def test_broken_plugin_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    _entry_points(monkeypatch, EntryPoint(name="broken", value="no_such_module_anywhere", group=GROUP))
    with pytest.raises(PluginError, match="plugin 'broken' \\(no_such_module_anywhere\\)"):
        load_plugins()


def test_other_groups_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    _entry_points(monkeypatch, EntryPoint(name="other", value="no_such_module_anywhere", group="elsewhere"))
    assert load_plugins() == []
