"""What the trainer fills into the engines' own configs: device, schedule length, the critic's value head, the frozen
reference, and the rollout engine built by name through rl-engines' registry."""

from __future__ import annotations

from typing import Any

import pytest

from rl_engines.rollout import ENGINE_EXTRAS, HFEngine
from rl_engines.training import load_hf_config
from rl_runtime.config import (
    ConfigError,
    RunConfig,
    WeightSyncKind,
    config_from_dict,
    resolve_weight_sync,
    weight_sync_transports,
)
from rl_runtime.config._schema_engines import reference_engine_config
from rl_runtime.trainer._engines import build_critic, make_rollout_engine, placed, rollout_dtype, rollout_spec

_HF_CONFIG = {
    "model_type": "qwen2", "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
    "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 64, "max_position_embeddings": 32,
}  # fmt: skip


def _config(*overrides: str, **sections: Any) -> RunConfig:
    data = {
        "data": {"train_files": ["t.jsonl"], "max_prompt_length": 8, "max_response_length": 8},
        "actor": {"model": {"hf_config": _HF_CONFIG, "init_seed": 3}},
        "algorithm": {"kl": {"mode": "none", "coef": 0.0}},
        "placement": {"device": "cpu"},
        **sections,
    }
    return config_from_dict(RunConfig, data, list(overrides))


def test_the_run_places_engines_and_gives_a_schedule_its_length() -> None:
    config = _config("actor.schedule.kind=cosine", "actor.schedule.warmup_steps=2")
    engine = placed(config.actor, config, total_steps=10)
    assert (engine.device, engine.schedule.total_steps, engine.schedule.warmup_steps) == ("cpu", 10, 2)
    own = _config("actor.schedule.kind=cosine", "actor.schedule.total_steps=5")
    assert placed(own.actor, own, total_steps=10).schedule.total_steps == 5  # a length of its own is kept


def test_a_null_reference_is_the_actors_engine_frozen() -> None:
    config = _config("actor.model.gradient_checkpointing=true", "actor.micro_batch.max_tokens_per_micro_batch=64")
    reference = reference_engine_config(config.actor, config.reference)
    assert reference.optimizer is None and reference.model.gradient_checkpointing is False
    assert reference.model.hf_config == config.actor.model.hf_config
    assert reference.micro_batch.max_tokens_per_micro_batch == 64
    own = _config("reference.model.path=/ref", "reference.optimizer=null")
    assert reference_engine_config(own.actor, own.reference).model.path == "/ref"


def test_the_critic_gets_its_value_head_and_the_value_clip() -> None:
    config = _config(
        "pipeline=ppo",
        "algorithm.adv_estimator=gae",
        "algorithm.value_clip=0.3",
        critic={"model": {"hf_config": _HF_CONFIG}},
    )
    critic = build_critic(config, total_steps=4)
    assert critic is not None and critic._engine.has_value_head and critic.clip_range == 0.3


def test_the_rollout_engine_is_built_by_name_with_the_actors_dtype() -> None:
    config = _config("rollout.engine_kwargs={max_batch_size: 4}")
    assert rollout_dtype(config) == "float32"
    spec = rollout_spec(config, None)
    assert (spec.dtype, spec.device, spec.seed, dict(spec.engine_kwargs)) == (
        "float32",
        "cpu",
        0,
        {"max_batch_size": 4},
    )
    engine = make_rollout_engine(config, load_hf_config(config.actor.model))
    try:
        assert isinstance(engine, HFEngine) and engine.config.max_batch_size == 4
    finally:
        engine.shutdown()
    assert rollout_dtype(_config("rollout.engine_kwargs={dtype: bfloat16}")) == "bfloat16"


def test_sglang_is_refused_at_load_with_the_reason() -> None:
    with pytest.raises(
        ValueError, match=r"rollout.engine: expected an engine the trainer can build .*'sglang'.*untested"
    ):
        _config("rollout.engine=sglang")


def test_an_engine_whose_extra_is_missing_is_refused_at_load_naming_the_pip_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(ENGINE_EXTRAS, "vllm", (("no_such_vllm_module",), "pip install 'rl-engines[vllm]'"))
    with pytest.raises(ConfigError, match=r"rollout.engine: .*no_such_vllm_module.*pip install 'rl-engines\[vllm\]'"):
        _config("rollout.engine=vllm")


def test_server_addresses_are_dealt_among_the_rollout_slots() -> None:
    servers = ["http://10.0.0.1:30000", "http://10.0.0.2:30000", "http://10.0.0.3:30000"]
    config = _config("rollout.engine=server", rollout={"engine": "server", "servers": servers})
    assert rollout_spec(config, None, 0, 2).servers == (servers[0], servers[2])
    assert rollout_spec(config, None, 1, 2).servers == (servers[1],)
    assert rollout_spec(_config("rollout.engine=server"), None).servers == ()


@pytest.mark.parametrize(
    ("overrides", "path", "fix"),
    [
        (["rollout.servers=[http://127.0.0.1:1]"], "rollout.servers", "set rollout.engine=server"),
        (["rollout.engine=server", "rollout.servers=[localhost]"], "rollout.servers", ""),
        (
            ["rollout.engine=server", "placement.slots=2", "rollout.servers=[http://127.0.0.1:1]"],
            "rollout.servers",
            "leave rollout.servers empty",
        ),
        (
            ["rollout.engine=server", "rollout.weight_sync=reference"],
            "rollout.weight_sync",
            "auto (here shared_memory)",
        ),
        (
            ["rollout.engine=server", "rollout.servers=[http://10.1.2.3:30000]", "rollout.weight_sync=shared_memory"],
            "rollout.weight_sync",
            "auto (here broadcast)",
        ),
        (["placement.device=cuda", "rollout.weight_sync=broadcast"], "rollout.weight_sync", "auto (here reference)"),
    ],
)
def test_servers_and_transports_the_placement_cannot_use_are_refused_at_load(
    overrides: list[str], path: str, fix: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _config(*overrides)
    assert path in str(caught.value) and fix in str(caught.value)


@pytest.mark.parametrize(
    ("overrides", "auto", "allowed"),
    [
        ([], "reference", ["reference", "shared_memory", "broadcast", "disk"]),
        (["rollout.engine=server"], "shared_memory", ["shared_memory", "broadcast", "disk"]),
        (["rollout.engine=server", "rollout.servers=[http://10.1.2.3:30000]"], "broadcast", ["broadcast", "disk"]),
        (["placement.device=cuda"], "reference", ["reference", "shared_memory", "disk"]),
    ],
)
def test_auto_takes_the_fastest_transport_the_placement_allows(
    overrides: list[str], auto: str, allowed: list[str]
) -> None:
    config = _config(*overrides)
    assert [kind.value for kind in weight_sync_transports(config)] == allowed
    assert resolve_weight_sync(config) is WeightSyncKind(auto)


def test_each_server_of_a_fleet_gets_its_own_folder_or_group_bounded_by_update_timeout_s(tmp_path: Any) -> None:
    from rl_engines.sync import BroadcastTransport, DiskTransport
    from rl_runtime.trainer._weight_transport import WEIGHT_SYNC_DIR, weight_transport

    server = ["rollout.engine=server", f"trainer.output_dir={tmp_path}", "rollout.engine_kwargs.update_timeout_s=7"]
    disk = weight_transport(_config(*server, "rollout.weight_sync=disk"), 0, 1)
    assert isinstance(disk, DiskTransport) and disk.root == tmp_path / WEIGHT_SYNC_DIR / "rank_0" / "server_1"
    group = weight_transport(_config(*server, "rollout.weight_sync=broadcast"), 0, 1)
    assert isinstance(group, BroadcastTransport)
    assert (group.group_name, group.timeout_s) == ("rollout_weights_0_1", 7.0)
    alone = weight_transport(_config(*server, "rollout.weight_sync=broadcast"), 0)
    assert isinstance(alone, BroadcastTransport) and alone.group_name == "rollout_weights_0"
