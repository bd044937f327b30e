"""CONTRIBUTING.md's estimator and policy-loss examples run as written: they register, and their asserts hold."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rl_core.advantages import ADVANTAGE_ESTIMATORS
from rl_core.losses import POLICY_LOSSES

CONTRIBUTING = Path(__file__).resolve().parents[3] / "CONTRIBUTING.md"
_EXAMPLE = re.compile(r"<!-- example: (?P<name>[\w-]+) -->\n```python\n(?P<code>.*?)\n```", re.DOTALL)


def contributing_example(name: str) -> str:
    """The python block marked `<!-- example: name -->` in CONTRIBUTING.md."""
    examples = {match["name"]: match["code"] for match in _EXAMPLE.finditer(CONTRIBUTING.read_text())}
    assert name in examples, f"CONTRIBUTING.md has no block marked <!-- example: {name} -->; found {sorted(examples)}"
    return examples[name]


@pytest.fixture
def registries() -> Iterator[None]:
    """Registrations the examples make are removed afterwards, so other tests see the built-in registries."""
    saved = dict(ADVANTAGE_ESTIMATORS), dict(POLICY_LOSSES)
    yield
    for registry, before in zip((ADVANTAGE_ESTIMATORS, POLICY_LOSSES), saved, strict=True):
        registry.clear()
        registry.update(before)


@pytest.mark.usefixtures("registries")
def test_estimator_example_registers_and_computes() -> None:
    namespace: dict[str, object] = {}
    exec(compile(contributing_example("estimator"), "CONTRIBUTING.md:estimator", "exec"), namespace)
    assert ADVANTAGE_ESTIMATORS["group_max_baseline"] is namespace["group_max_baseline"]


@pytest.mark.usefixtures("registries")
def test_policy_loss_example_registers_and_computes() -> None:
    namespace: dict[str, object] = {}
    exec(compile(contributing_example("policy-loss"), "CONTRIBUTING.md:policy-loss", "exec"), namespace)
    assert POLICY_LOSSES["clipped_reinforce"] is namespace["clipped_reinforce"]


def test_environment_example_registers_and_conforms() -> None:
    from rl_core.envs import ENVIRONMENTS, EnvConfig, make_env
    from rl_core.testing import check_vector_env

    namespace: dict[str, object] = {}
    before = dict(ENVIRONMENTS)
    try:
        exec(compile(contributing_example("environment"), "CONTRIBUTING.md:environment", "exec"), namespace)
        env = make_env(EnvConfig(name="countdown", num_envs=3, max_steps=4))
        assert check_vector_env(env, chunk=2) > 0
        env.close()
    finally:
        ENVIRONMENTS.clear()
        ENVIRONMENTS.update(before)


def test_tooling_env_example_registers_and_conforms() -> None:
    import asyncio

    from rl_core.testing import check_tooling_env
    from rl_core.tools import TOOLING_ENVS, ToolingEnvConfig, make_tooling_env

    namespace: dict[str, object] = {}
    before = dict(TOOLING_ENVS)
    try:
        exec(compile(contributing_example("tooling-env"), "CONTRIBUTING.md:tooling-env", "exec"), namespace)
        env = asyncio.run(make_tooling_env(ToolingEnvConfig(name="echo")))
        assert check_tooling_env(env, [("echo", {"text": "hi"}, "hi")]) == ["echo"]
    finally:
        TOOLING_ENVS.clear()
        TOOLING_ENVS.update(before)


def test_workflow_example_registers_and_runs_an_episode() -> None:
    import asyncio
    from collections.abc import Sequence

    from rl_core.workflows import WORKFLOWS, Completion, EpisodeInput, load_workflow

    class FakeEpisodeEngine:
        """Test double of the runtime's engine adapter: every call samples tokens 9, 9 at version 0."""

        token_budget = 64

        async def agenerate(
            self, prompt_ids: Sequence[int], *, max_new_tokens: int | None = None, stop_token_ids: Sequence[int] = ()
        ) -> Completion:
            return Completion((9, 9), (-0.1, -0.1), (0, 0))

    before = dict(WORKFLOWS)
    try:
        exec(compile(contributing_example("workflow"), "CONTRIBUTING.md:workflow", "exec"), {})
        workflow = load_workflow("self_check", {"max_turns": 3})
        trajectory = asyncio.run(workflow.arun_episode(FakeEpisodeEngine(), EpisodeInput((1, 2, 3))))
        assert trajectory is not None
        assert trajectory.token_ids == (1, 2, 3, 9, 9, 5, 6, 9, 9, 5, 6, 9, 9)
        assert trajectory.loss_mask == (0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1)
        assert trajectory.reward == 1.0 and trajectory.num_turns == 3
    finally:
        WORKFLOWS.clear()
        WORKFLOWS.update(before)
