"""Every public module imports in a fresh interpreter, and rl-core pulls in nothing but torch."""

from __future__ import annotations

import pytest

from rl_core.testing import modules_loaded_by_import, public_modules, third_party


@pytest.mark.parametrize("module", public_modules("rl_core"))
def test_public_module_imports_alone(module: str) -> None:
    assert module in modules_loaded_by_import(module)


def test_rl_core_loads_no_third_party_module_beyond_torch() -> None:
    # Whatever torch itself imports is torch's business; rl-core may add only its own modules.
    torch_roots = {name.split(".")[0] for name in modules_loaded_by_import("torch")}
    added_by_rl_core = modules_loaded_by_import("rl_core", preload=("torch",))
    extra = third_party(added_by_rl_core, allowed={"rl_core", *torch_roots})
    assert extra == set(), f"rl_core imported third-party modules: {sorted(extra)}"
