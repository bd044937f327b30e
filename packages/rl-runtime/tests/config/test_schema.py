"""The run-config schema: every field documented and round-tripping, typos, wrong types and cross-section checks."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
from pathlib import Path
from typing import Any

import attrs
import pytest

from rl_core.advantages import ADVANTAGE_ESTIMATORS
from rl_engines.training import TrainEngineConfig
from rl_runtime.config import (
    ApportionStrategy,
    ConfigError,
    KLMode,
    RunConfig,
    config_from_dict,
    dump_config,
    resolve_policy_loss,
)
from rl_runtime.config._converter import is_config_class, structure
from rl_runtime.config._translate import field_types


def _sections(cls: type, seen: dict[type, None] | None = None) -> list[type]:
    """Every config class reachable from `cls` through its fields (including `cls`)."""
    seen = {} if seen is None else seen
    if cls in seen:
        return list(seen)
    seen[cls] = None
    for tp in field_types(cls).values():
        for member in (tp, *getattr(tp, "__args__", ())):
            if is_config_class(member):
                _sections(member, seen)
    return list(seen)


_DECIDED_BY_THE_RUN = {
    ("ModelConfig", "value_head"),
    ("TrainEngineConfig", "device"),
    ("RolloutConfig", "engine"),
    ("RewardModelConfig", "placement"),
}
"""Fields a valid run config leaves at their defaults: the run adds the critic's value head and places engines on
placement.device (setting either is refused), "hf" is the one rollout engine a trainer can build yet, and a reward
model runs colocated ("slot" is refused: not built)."""


def _fields(cls: type) -> list[tuple[str, Any]]:
    """(name, default) of each init field of an attrs class or dataclass; the default is attrs.NOTHING if none."""
    if attrs.has(cls):
        return [(field.name, _default(field)) for field in attrs.fields(cls) if field.init]
    out = []
    for field in dataclasses.fields(cls):
        if field.default_factory is not dataclasses.MISSING:
            out.append((field.name, field.default_factory()))
        else:
            out.append((field.name, attrs.NOTHING if field.default is dataclasses.MISSING else field.default))
    return out


def _owner(cls: type, name: str) -> type:
    """The class that declares field `name` (a subclass inherits its parent's fields)."""
    return next(base for base in cls.__mro__ if name in inspect.get_annotations(base))


def _field_values(config: object, out: dict[tuple[type, str], list[Any]]) -> None:
    """Record every (declaring class, field) -> values found anywhere in `config`."""
    for name, _ in _fields(type(config)):
        value = getattr(config, name)
        out.setdefault((_owner(type(config), name), name), []).append(value)
        if is_config_class(type(value)):
            _field_values(value, out)


def _default(field: attrs.Attribute[Any]) -> Any:
    if isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
        return field.default.factory()
    return field.default


def _documented_fields(cls: type) -> set[str]:
    """Fields of `cls` whose annotated assignment is followed by a docstring, read from the source."""
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body  # type: ignore[attr-defined]
    documented = set()
    for statement, following in itertools.pairwise(body):
        is_doc = isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
        if isinstance(statement, ast.AnnAssign) and is_doc and isinstance(following.value.value, str):
            documented.add(statement.target.id)  # type: ignore[union-attr]
    return documented


def test_every_field_of_every_section_is_documented() -> None:
    for cls in _sections(RunConfig):
        own = {name for name, _ in _fields(cls) if name in inspect.get_annotations(cls)}
        missing = own - _documented_fields(cls)
        assert not missing, f"{cls.__name__} fields without a docstring: {sorted(missing)}"


def test_full_config_sets_every_field_to_a_non_default_value(
    full_data: dict[str, Any], full_embodied_data: dict[str, Any]
) -> None:
    values: dict[tuple[type, str], list[Any]] = {}
    _field_values(config_from_dict(RunConfig, full_data), values)
    # The env sections exist only in an embodied pipeline, which a PPO config cannot be.
    _field_values(config_from_dict(RunConfig, full_embodied_data), values)
    # Continuous generation runs single-turn rollouts on the hf engine, which full_data's rollout section is not (its
    # engine_kwargs are the server engine's, which the hf engine refuses).
    rollout = {
        **full_data["rollout"],
        **{"engine": "hf", "workflow": "single_turn", "workflow_kwargs": {}, "servers": [], "engine_kwargs": {}},
    }
    algorithm = {**full_data["algorithm"], "async_generation": "continuous", "max_staleness": 2}
    _field_values(config_from_dict(RunConfig, {**full_data, "rollout": rollout, "algorithm": algorithm}), values)
    # An in-reward KL penalty with its adaptive target (ppo then runs its variant with the log-probs first).
    kl = {"mode": "in_reward", "estimator": "k1", "coef": 0.05, "target": 0.1, "horizon": 500}
    in_reward = {**full_data["algorithm"], "kl": kl}
    _field_values(config_from_dict(RunConfig, {**full_data, "algorithm": in_reward}), values)
    # Skipping the zero-advantage rows' forward: an on-policy ppo step whose loss reads no row beyond the ratio.
    on_policy = {
        **full_data["algorithm"],
        "policy_loss": "ppo",
        "entropy_coef": 0.0,
        "rollout_correction": None,
        "max_staleness": 0,
        "recompute_old_log_prob": "auto",
        "skip_inert_rows": True,
    }
    one_update = {**full_data["batch"], "ppo_epochs": 1, "mini_batches_per_step": 1}
    _field_values(config_from_dict(RunConfig, {**full_data, "algorithm": on_policy, "batch": one_update}), values)
    for cls in _sections(RunConfig):
        for name, default in _fields(cls):
            if default is attrs.NOTHING or (cls.__name__, name) in _DECIDED_BY_THE_RUN:
                continue  # required (set by construction), or fixed by the run
            found = values.get((_owner(cls, name), name), [])
            exercised = [value for value in found if value != default]
            assert exercised, f"{cls.__name__}.{name} never differs from its default in full_data"


def test_every_field_round_trips(full_data: dict[str, Any]) -> None:
    config = config_from_dict(RunConfig, full_data)
    dumped = dump_config(config)
    assert structure(dumped, RunConfig) == config
    assert dump_config(structure(dumped, RunConfig)) == dumped
    # Each section also round-trips on its own.
    for section in attrs.fields(RunConfig):
        value = getattr(config, section.name)
        if is_config_class(type(value)):
            assert structure(dump_config(value), type(value)) == value


def test_structured_values_have_their_declared_types(full_data: dict[str, Any]) -> None:
    config = config_from_dict(RunConfig, full_data)
    assert config.data.train_files == (Path("a.jsonl"), Path("b.parquet"))
    assert isinstance(config.actor, TrainEngineConfig)
    assert config.actor.optimizer is not None and config.actor.optimizer.betas == (0.8, 0.95)
    assert config.actor.schedule.kind == "cosine"
    assert config.actor.precision.compute_dtype == "float16"
    assert config.algorithm.kl.mode is KLMode.NONE
    assert config.placement.strategy is ApportionStrategy.EVEN
    assert config.trainer.log_sinks == ("jsonl", "tensorboard", "wandb")
    assert config.trainer.output_dir == Path("/tmp/run")
    assert config.critic is not None and config.algorithm.value_clip == 0.2
    assert config.reference is not None and config.reference.optimizer is None
    dumped = dump_config(config)
    assert dumped["actor"]["optimizer"]["betas"] == [0.8, 0.95]
    assert dumped["actor"]["precision"]["compute_dtype"] == "float16"
    assert dumped["trainer"]["output_dir"] == "/tmp/run"


def test_minimal_config_takes_the_documented_defaults(minimal_data: dict[str, Any]) -> None:
    config = config_from_dict(RunConfig, minimal_data)
    assert config.pipeline == "grpo"
    assert (config.algorithm.adv_estimator, config.algorithm.policy_loss) == ("grpo", "auto")
    assert resolve_policy_loss(config.algorithm) == "ppo"  # synchronous by default: auto runs ppo
    assert config.algorithm.kl.mode is KLMode.AS_LOSS and config.algorithm.kl.estimator == "low_var_kl"
    assert config.batch.prompts_per_step == 8 and config.batch.samples_per_prompt == 1
    assert config.actor.optimizer is not None
    assert config.actor.optimizer.lr == 1e-6 and config.actor.optimizer.betas == (0.9, 0.999)
    assert config.actor.micro_batch.max_tokens_per_micro_batch == 8192
    assert config.critic is None and config.reference is None
    assert config.trainer.resume == "auto" and config.trainer.log_sinks == ("console",)
    assert config.rollout.workflow == "single_turn" and config.rollout.workflow_kwargs == {}


@pytest.mark.parametrize(
    ("section", "typo", "nearest"),
    [
        ((), "trainr", "trainer"),
        (("data",), "max_promt_length", "max_prompt_length"),
        (("actor", "optimizer"), "lrr", "lr"),
        (("actor", "micro_batch"), "max_tokens_per_microbatch", "max_tokens_per_micro_batch"),
        (("actor", "model"), "pth", "path"),
        (("algorithm", "kl"), "estimater", "estimator"),
    ],
)
def test_unknown_key_at_any_depth_names_the_nearest_field(
    minimal_data: dict[str, Any], section: tuple[str, ...], typo: str, nearest: str
) -> None:
    target = minimal_data
    for key in section:
        target = target.setdefault(key, {})
    target[typo] = 1
    path = ".".join([*section, typo])
    with pytest.raises(
        ConfigError, match=rf"{path}: expected a field of \w+ \(.*\), found an unknown key; did you mean '{nearest}'\?"
    ):
        config_from_dict(RunConfig, minimal_data)


@pytest.mark.parametrize(
    ("section", "key", "moved"),
    [
        ("actor", "optim", r"optimizer \(lr, .*\) and schedule \(schedule as kind"),
        ("actor", "dtype", r"precision.compute_dtype"),
        ("critic", "value_clip", r"algorithm.value_clip"),
        ("batch", "max_tokens_per_micro_batch", r"actor.micro_batch.max_tokens_per_micro_batch"),
    ],
)
def test_a_key_that_moved_names_its_new_place(minimal_data: dict[str, Any], section: str, key: str, moved: str) -> None:
    minimal_data.setdefault(section, {"model": {"path": "/c"}})[key] = 1
    if section == "critic":
        minimal_data["pipeline"] = "ppo"
    with pytest.raises(
        ConfigError, match=rf"{section}.{key}: expected a field of \w+ .*found an unknown key; moved to {moved}"
    ):
        config_from_dict(RunConfig, minimal_data)
    with pytest.raises(ConfigError, match=rf"{section}.{key}: expected a key of {section} .*; moved to {moved}"):
        config_from_dict(RunConfig, {**minimal_data, section: None}, [f"{section}.{key}=1"])


def test_every_problem_is_reported_at_once(minimal_data: dict[str, Any]) -> None:
    minimal_data["trainr"] = {}
    minimal_data["data"]["seed"] = "zero"
    minimal_data["rollout"] = {"top_p": "high", "enigne": "hf"}
    with pytest.raises(ConfigError) as caught:
        config_from_dict(RunConfig, minimal_data)
    assert sorted(problem.path for problem in caught.value.problems) == [
        "data.seed",
        "rollout.enigne",
        "rollout.top_p",
        "trainr",
    ]
    assert str(caught.value).startswith("4 problems in the configuration")


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("data.max_prompt_length", 1.5, r"data.max_prompt_length: expected an int, found 1.5 \(float\)"),
        ("data.seed", True, r"data.seed: expected an int, found True \(bool\)"),
        ("actor.optimizer.lr", "fast", r"actor.optimizer.lr: expected a float, found 'fast' \(str\)"),
        ("data.shuffle", "yes", r"data.shuffle: expected a bool \(true or false\), found 'yes' \(str\)"),
        ("data.prompt_key", 5, r"data.prompt_key: expected a str, found 5 \(int\)"),
        ("trainer.log_sinks", "console", r"trainer.log_sinks: expected a list of str, found 'console' \(str\)"),
        ("actor.optimizer.betas", [0.9], r"actor.optimizer.betas: expected a list of 2 values \(a float, a float\)"),
        ("placement.device", "tpu", r"placement.device: expected one of 'auto', 'cpu', 'cuda', found 'tpu'"),
        ("rollout.max_new_tokens", "10", r"rollout.max_new_tokens: expected an int or null, found '10'"),
        ("actor.optimizer", "fast", r"actor.optimizer: expected a mapping \(OptimizerConfig\) or null, found 'fast'"),
        (
            "actor.micro_batch.packing",
            1,
            r"actor.micro_batch.packing: expected a bool \(true or false\) or a str, found 1",
        ),
        ("rollout.engine_kwargs", [1], r"rollout.engine_kwargs: expected a mapping of str to any value"),
        ("algorithm.adv_params", {"epsilon": [1]}, r"algorithm.adv_params.epsilon: expected a scalar"),
        ("data.train_files", ["a", 3], r"data.train_files.1: expected a path \(str\), found 3 \(int\)"),
    ],
)
def test_wrong_type_names_the_field_the_expected_type_and_the_value(
    minimal_data: dict[str, Any], path: str, value: object, message: str
) -> None:
    *parents, leaf = path.split(".")
    target = minimal_data
    for key in parents:
        target = target.setdefault(key, {})
    target[leaf] = value
    with pytest.raises(ConfigError, match=message):
        config_from_dict(RunConfig, minimal_data)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("algorithm.adv_estimator=grop", r"registered advantage estimator \(cpgd, gae, .*rloo\), found 'grop'.*'grpo'"),
        ("algorithm.policy_loss=gpso", r"registered policy loss \(.*\), found 'gpso'.*did you mean 'gspo'"),
        ("algorithm.loss_agg_mode=token_mean", r"loss_agg_mode: .*did you mean 'token-mean'"),
        ("algorithm.kl.estimator=low_var", r"algorithm.kl.estimator: .*did you mean 'low_var_kl'"),
        ("pipeline=grop", r"pipeline: expected a registered pipeline \(.*\) or a pipeline file .*'grpo'"),
        (  # registered, but it acts in an environment the config does not name
            "pipeline=embodied_srpo",
            r"env: expected an env section: pipeline 'embodied_srpo' acts in an environment, found null",
        ),
        (
            "rollout.engine=hff",
            r"rollout.engine: expected a registered rollout engine \(hf, server, vllm\), found 'hff'.*'hf'",
        ),
        ("trainer.log_sinks=[console, tensorbord]", r"trainer.log_sinks.1: .*did you mean 'tensorboard'"),
        ("trainer.log_sinks=[console, console]", r"trainer.log_sinks: expected distinct log sink names"),
        ("placement.strategy=param-aware", r"placement.strategy: .*did you mean 'param_aware'"),
        ("rollout.workflow=single_trun", r"rollout.workflow: .*found single_trun.*did you mean 'single_turn'"),
        ("rollout.workflow=no_pkg.flows:Agent", r"rollout.workflow: .*module 'no_pkg' not found"),
        ("rollout.workflow_kwargs={turns: 2}", r"rollout.workflow: .*building it with rollout.workflow_kwargs"),
    ],
)
def test_unknown_registry_names_list_the_valid_ones(minimal_data: dict[str, Any], override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(RunConfig, minimal_data, [override])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "algorithm.adv_params={nomr_by_std: false}",
            r"adv_params.nomr_by_std: .*'grpo' \(epsilon, norm_by_std\).*'norm_by_std'",
        ),
        ("algorithm.adv_params={norm_by_std: 1}", r"adv_params.norm_by_std: expected a value like its default True"),
        ("algorithm.policy_loss_params={aggregation: token-mean}", r"policy_loss_params.aggregation: .*unknown key"),
        ("algorithm.policy_loss_params={clip_ratio: high}", r"clip_ratio: expected a value like its default 0.2"),
    ],
)
def test_algorithm_params_are_checked_against_the_function(
    minimal_data: dict[str, Any], override: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(RunConfig, minimal_data, [override])


def test_params_of_a_later_registered_estimator_are_accepted(
    minimal_data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def my_estimator(inputs: object, *, temperature: float = 1.0) -> object:
        return inputs

    monkeypatch.setitem(ADVANTAGE_ESTIMATORS, "my_estimator", my_estimator)
    overrides = ["algorithm.adv_estimator=my_estimator", "algorithm.adv_params.temperature=0.5"]
    assert config_from_dict(RunConfig, minimal_data, overrides).algorithm.adv_params == {"temperature": 0.5}
