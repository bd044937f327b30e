"""The public names of rl_runtime.evaluation are pinned."""

from __future__ import annotations

import rl_runtime.evaluation as evaluation

PUBLIC = [
    "PASS_SCORE", "Evaluation", "evaluate_prompts", "pass_at_k",
]  # fmt: skip


def test_public_api_is_pinned() -> None:
    assert sorted(evaluation.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert hasattr(evaluation, name), name
