"""`lazy_exports`: a package's names imported from their submodule on first use, cached, others refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rl_core import lazy_exports


def test_a_name_is_imported_on_first_use_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "lazy_pkg_probe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_heavy.py").write_text("VALUE = object()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import lazy_pkg_probe  # type: ignore[import-not-found]  # pyright: ignore[reportMissingImports]

    getattr_ = lazy_exports("lazy_pkg_probe", {"VALUE": "_heavy"})
    assert "lazy_pkg_probe._heavy" not in sys.modules
    value = getattr_("VALUE")
    assert value is sys.modules["lazy_pkg_probe._heavy"].VALUE
    assert lazy_pkg_probe.VALUE is value  # cached in the package: its __getattr__ is not asked again
    with pytest.raises(AttributeError, match=r"module 'lazy_pkg_probe' has no attribute 'OTHER'"):
        getattr_("OTHER")
    for name in ("lazy_pkg_probe", "lazy_pkg_probe._heavy"):
        monkeypatch.delitem(sys.modules, name)
