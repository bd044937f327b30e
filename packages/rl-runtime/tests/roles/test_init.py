"""The public names of rl_runtime.roles are pinned."""

from __future__ import annotations

import rl_runtime.roles as roles


def test_public_api_is_pinned() -> None:
    assert sorted(roles.__all__) == sorted(
        [
            "ActorRole", "CriticRole", "ReferenceRole", "RoleError",
        ]
    )  # fmt: skip
    assert all(hasattr(roles, name) for name in roles.__all__)
