"""Every packaged recipe config loads, runs the algorithm its name promises, and opens with its command."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from rl_recipes.recipes import RECIPES, Recipe, config_path, get_recipe, load_recipe_config, run_recipe
from rl_runtime.config import ConfigError

EXPECTED = {
    "grpo": ("grpo", "grpo"),
    "dr_grpo": ("grpo", "grpo"),
    "rloo": ("grpo", "rloo"),
    "reinforce_plus_plus": ("grpo", "reinforce_plus_plus"),
    "ppo": ("ppo", "gae"),
    "dapo": ("dapo", "grpo"),
    "remax": ("remax", "remax"),
}
EMBODIED = {"srpo": ("embodied_srpo", "grpo")}
AGENTIC = {"agentic": ("grpo", "grpo")}


def test_the_seven_rl_recipes_are_registered() -> None:
    assert sorted(RECIPES) == sorted({**EXPECTED, **EMBODIED, **AGENTIC})


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_packaged_config_loads_and_passes_its_recipe_checks(name: str) -> None:
    recipe = get_recipe(name)
    config = load_recipe_config(name)
    recipe.check(config)
    assert (config.pipeline, config.algorithm.adv_estimator) == EXPECTED[name]
    first_line = config_path(recipe.config_file).read_text().splitlines()[0]
    assert first_line == f"# rl-recipes train {name}"
    assert config.warm_start is not None and config.actor.model.path == str(config.warm_start_model)


def test_the_packaged_srpo_config_loads_and_passes_its_checks() -> None:
    from rl_recipes.embodied import SRPORecipeConfig
    from rl_runtime.config import RewardKind

    config = load_recipe_config("srpo")
    get_recipe("srpo").check(config)
    assert isinstance(config, SRPORecipeConfig)
    assert (config.pipeline, config.algorithm.adv_estimator) == EMBODIED["srpo"]
    assert config.algorithm.reward is RewardKind.SRPO and config.embedder is not None
    assert config.env is not None and config.env.tasks == ("GoToRedBallNoDists",)
    assert config.warm_start is not None and config.actor.model.path == str(config.warm_start.model_dir)
    assert config_path("srpo.yaml").read_text().splitlines()[0].startswith("# rl-recipes train srpo")
    baseline = load_recipe_config("srpo", overrides=["algorithm.reward=binary"])
    assert baseline.algorithm.reward is RewardKind.BINARY


def test_srpo_refuses_pools_larger_than_the_env_s_trials() -> None:
    with pytest.raises(ConfigError, match=r"env.num_trials: expected >= train_trials \+ heldout_trials = 32"):
        load_recipe_config("srpo", overrides=["train_trials=16", "heldout_trials=16", "env.num_trials=20"])


def test_the_packaged_agentic_config_loads_and_passes_its_checks() -> None:
    from rl_recipes.agentic import AgenticRecipeConfig

    config = load_recipe_config("agentic")
    get_recipe("agentic").check(config)
    assert isinstance(config, AgenticRecipeConfig)
    assert (config.pipeline, config.algorithm.adv_estimator) == AGENTIC["agentic"]
    assert config.rollout.workflow == "tool_calling" and config.rollout.workflow_kwargs["tools"] == ["calculator"]
    assert config.warm_start is not None and config.actor.model.path == str(config.warm_start.model_dir)
    assert config_path("agentic.yaml").read_text().splitlines()[0] == "# rl-recipes train agentic"
    with pytest.raises(ConfigError, match=r"rollout\.workflow"):
        get_recipe("agentic").check(load_recipe_config("agentic", overrides=["rollout.workflow=single_turn"]))


@pytest.mark.parametrize("name", sorted({**EXPECTED, **EMBODIED, **AGENTIC}))
def test_each_recipe_module_names_its_pipeline_and_registers_its_run(name: str) -> None:
    module = importlib.import_module(f"rl_recipes.recipes.{name}")
    assert {**EXPECTED, **EMBODIED, **AGENTIC}[name][0] == module.PIPELINE
    assert get_recipe(name).run is module.run and get_recipe(name).checks == module.CHECKS


def test_run_recipe_runs_the_recipe_module_s_run_holding_the_run_folder(tmp_path: Path) -> None:
    calls: list[object] = []
    lock = tmp_path / ".run.lock"
    recipe = Recipe(
        "probe", "a probe", "grpo.yaml", run=lambda config: calls.append((config, lock.is_file())) or "done"
    )
    config = load_recipe_config("grpo", overrides=[f"trainer.output_dir={tmp_path}"])
    assert run_recipe(recipe, config) == "done" and calls == [(config, True)]  # type: ignore[comparison-overlap]


def test_dr_grpo_refuses_std_normalised_advantages() -> None:
    config = load_recipe_config("dr_grpo", overrides=["algorithm.adv_params.norm_by_std=true"])
    with pytest.raises(ConfigError, match=r"algorithm\.adv_params\.norm_by_std.*no std normalisation"):
        get_recipe("dr_grpo").check(config)


def test_ppo_refuses_a_config_without_gae() -> None:
    overrides = ["algorithm.adv_estimator=reinforce_plus_plus", "algorithm.adv_params={gamma: 1.0}"]
    config = load_recipe_config("ppo", overrides=overrides)
    with pytest.raises(ConfigError, match=r"algorithm\.adv_estimator.*'gae'"):
        get_recipe("ppo").check(config)


@pytest.mark.parametrize(
    ("template", "error"), [("Q: {foo}", "KeyError: 'foo'"), ("Q: {question} {", "Single '{' encountered")]
)
def test_a_prompt_template_the_prompt_builder_cannot_fill_is_refused_at_load(template: str, error: str) -> None:
    # The rollout workers fill it when they encode the prompts; refused when the config loads instead.
    with pytest.raises(
        ConfigError,
        match=r"task: expected a valid MathTaskConfig, found ValueError: task.template must be a str.format template "
        rf"whose only placeholder is \{{question\}}, got .*{error}.*escape a literal brace as \{{\{{ or \}}\}}",
    ):
        load_recipe_config("grpo", overrides=[f"task.template='{template}'"])
    assert load_recipe_config("grpo", overrides=["task.template='Q: {question} {{x}}'"]).task.template.endswith("{{x}}")


def test_unknown_recipe_names_the_nearest() -> None:
    with pytest.raises(KeyError, match="grpo"):
        get_recipe("grpoo")


def test_a_typo_in_an_override_names_the_nearest_field() -> None:
    with pytest.raises(ConfigError, match=r"did you mean 'rollout\.temperature'"):
        load_recipe_config("grpo", overrides=["rollout.temprature=0.5"])


def test_a_model_without_a_tokenizer_is_refused() -> None:
    overrides = ["actor.model.path=null", "actor.model.hf_config={model_type: llama}"]
    with pytest.raises(ConfigError, match="tokenizer"):
        load_recipe_config("grpo", overrides=overrides)


def test_the_packaged_sft_config_loads_with_its_early_stop() -> None:
    from rl_recipes.sft import SFTConfig
    from rl_runtime.config import load_config

    config = load_config(SFTConfig, config_path("sft.yaml"))
    assert config.model == "embedded" and config.stop_at_exact_match == 0.2
    assert config_path("sft.yaml").read_text().splitlines()[0] == "# rl-recipes sft"
