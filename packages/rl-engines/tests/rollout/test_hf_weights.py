"""HFEngine weight updates (disk, tensors, broadcast), their rejections, versions, and sleep levels."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch

from rl_engines.rollout import (
    EngineAsleepError,
    EngineStateError,
    HFEngine,
    InvalidRequestError,
    ParameterShapeError,
    UnknownParameterError,
    UnversionedWeightsError,
    WeightGroup,
    WeightGroupSpec,
    WeightsMeta,
    WeightsNotLoadedError,
)
from rl_engines.sync import free_port
from rl_engines.testing import ConformanceModels, Harness

request = Harness.request


def _v2_sum(models: ConformanceModels) -> str:
    return models.checksum(models.state(2))


def test_tensor_update_then_version(engine: HFEngine, models: ConformanceModels) -> None:
    engine.update_weights_from_tensors(list(models.state(2).items()))
    assert engine.weights_checksum() == _v2_sum(models)
    with pytest.raises(UnversionedWeightsError, match=r"call set_weight_version\(\.\.\.\)"):
        engine.generate([request("x", [1], 1)])
    engine.set_weight_version(2)
    assert engine.generate([request("x", [1], 1)])[0].weight_version == engine.weight_version() == 2


def test_tensor_update_copies_so_the_sender_may_reuse_its_tensors(engine: HFEngine, models: ConformanceModels) -> None:
    sent = {name: t.clone() for name, t in models.state(2).items()}
    engine.update_weights_from_tensors(list(sent.items()))
    for tensor in sent.values():
        tensor.zero_()
    assert engine.weights_checksum() == _v2_sum(models)


def test_sharded_checkpoint_with_index_loads(engine: HFEngine, models: ConformanceModels, tmp_path: Path) -> None:
    models.v2.save_pretrained(tmp_path, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").is_file() and len(list(tmp_path.glob("*.safetensors"))) > 1
    engine.update_weights_from_disk(tmp_path)
    assert engine.weights_checksum() == _v2_sum(models)


def test_rejected_updates_change_nothing(engine: HFEngine, models: ConformanceModels, tmp_path: Path) -> None:
    before = engine.weights_checksum()
    good = models.state(2)["model.norm.weight"]
    with pytest.raises(UnknownParameterError, match=r"did you mean 'model\.norm\.weight'"):
        engine.update_weights_from_tensors([("model.norm.weight", good), ("model.norm.weigth", good)])
    with pytest.raises(ParameterShapeError, match=r"shape \(65,\), but the model's is \(64,\)"):
        engine.update_weights_from_tensors([("model.norm.weight", torch.ones(65))])
    with pytest.raises(InvalidRequestError, match="got no tensors"):
        engine.update_weights_from_tensors([])
    with pytest.raises(InvalidRequestError, match=r"neither a directory nor a \.safetensors file"):
        engine.update_weights_from_disk(tmp_path / "missing")
    with pytest.raises(InvalidRequestError, match=r"no \.safetensors files"):
        engine.update_weights_from_disk(tmp_path)
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "gone.safetensors"}}))
    with pytest.raises(InvalidRequestError, match="are missing"):
        engine.update_weights_from_disk(tmp_path)
    with pytest.raises(UnknownParameterError, match="'nope'"):
        engine.weights_checksum(["nope"])
    with pytest.raises(InvalidRequestError, match="weight version must be a weight version, an int >= 0"):
        engine.set_weight_version("2")
    assert engine.weights_checksum() == before
    assert engine.generate([request("x", [1], 1)])[0].weight_version == 1


def _spec(port: int) -> WeightGroupSpec:
    return WeightGroupSpec("127.0.0.1", port, 1, 2, timeout_s=10.0)


def _run_broadcast(engine: HFEngine, named: list[tuple[str, torch.Tensor]]) -> BaseException | None:
    """Trainer side of one bucket on this thread, engine side on another; returns the engine's error."""
    spec = _spec(free_port())
    joiner = threading.Thread(target=engine.init_weights_update_group, args=(spec,))
    joiner.start()
    trainer = WeightGroup(spec, 0)
    joiner.join()
    errors: list[BaseException] = []

    def receive() -> None:
        try:
            engine.update_weights_from_distributed(WeightsMeta.of(named))
        except BaseException as error:
            errors.append(error)

    receiver = threading.Thread(target=receive)
    receiver.start()
    for _, tensor in named:
        trainer.broadcast(tensor.contiguous(), src=0)
    receiver.join(timeout=10)
    assert not receiver.is_alive()
    engine.destroy_weights_update_group()
    trainer.close()
    return errors[0] if errors else None


def test_broadcast_update(engine: HFEngine, models: ConformanceModels) -> None:
    assert _run_broadcast(engine, list(models.state(2).items())) is None
    assert engine.weights_checksum() == _v2_sum(models)


def test_broadcast_rejection_is_drained_and_raised(engine: HFEngine, models: ConformanceModels) -> None:
    before = engine.weights_checksum()
    error = _run_broadcast(engine, [("lm_head.weight", models.state(2)["lm_head.weight"]), ("bogus", torch.ones(3))])
    assert isinstance(error, UnknownParameterError) and "bogus" in str(error)
    assert engine.weights_checksum() == before


def test_broadcast_needs_a_group(engine: HFEngine) -> None:
    with pytest.raises(EngineStateError, match=r"call init_weights_update_group\(spec\) first"):
        engine.update_weights_from_distributed(WeightsMeta(("a",), ("float32",), ((1,),)))
    engine.destroy_weights_update_group()  # a no-op without a group


def test_sleep_level_1_keeps_outputs(engine: HFEngine, models: ConformanceModels) -> None:
    prompts = models.prompts(2)
    before = [o.output_ids for o in engine.generate([request(f"r{i}", p, 6) for i, p in enumerate(prompts)])]
    engine.sleep(1)
    assert engine.status().state == "asleep" and engine.status().asleep == {"weights", "kv_cache"}
    with pytest.raises(EngineAsleepError, match=r"call wake_up\(\) first"):
        engine.generate([request("x", [1], 1)])
    with pytest.raises(EngineAsleepError, match=r"wake_up\(tags=\['weights'\]\) before updating"):
        engine.update_weights_from_tensors(list(models.state(2).items()))
    with pytest.raises(InvalidRequestError, match="non-empty subset"):
        engine.wake_up(["gpu"])
    with pytest.raises(InvalidRequestError, match="sleep level must be 1"):
        engine.sleep(3)  # type: ignore[arg-type]
    engine.wake_up()
    after = [o.output_ids for o in engine.generate([request(f"r{i}", p, 6) for i, p in enumerate(prompts)])]
    assert after == before


def test_sleep_level_2_needs_every_tensor_again(engine: HFEngine, models: ConformanceModels) -> None:
    engine.sleep(2)
    assert all(p.numel() == 0 for p in engine.model.parameters())
    engine.wake_up()
    with pytest.raises(WeightsNotLoadedError, match="send a full weight update"):
        engine.generate([request("x", [1], 1)])
    v1 = models.state(1)
    engine.update_weights_from_tensors([("model.norm.weight", v1["model.norm.weight"])])
    engine.set_weight_version(3)
    with pytest.raises(WeightsNotLoadedError):
        engine.generate([request("x", [1], 1)])
    engine.update_weights_from_disk(models.v1_dir)
    engine.set_weight_version(1)
    assert engine.weights_checksum() == models.checksum(v1)
    assert engine.generate([request("x", [1], 1)])[0].weight_version == 1
