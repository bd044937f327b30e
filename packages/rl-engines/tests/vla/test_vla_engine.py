"""The train engine on a tiny VLA in one process: outputs, micro-batching, a PPO step, checkpoint and export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from _vla_helpers import (
    SMALL,
    reference_vla,
    small_config,
    trajectory_batch,
    vla_engine_config,
    with_ppo_fields,
)

from rl_core.losses import LossNormalizer, PolicyLossInputs, get_policy_loss
from rl_engines.training import (
    BatchError,
    ForwardOutput,
    ForwardSpec,
    FSDPEngine,
    LossOutput,
    ModelConfig,
    TrainConfigError,
    TrainEngineConfig,
)
from rl_engines.vla import TinyVLAForActionChunking, WordTokenizer, action_log_probs


def ppo_loss_fn(outputs: ForwardOutput, micro_batch: dict[str, torch.Tensor], normalizer: LossNormalizer) -> LossOutput:
    """The registry's PPO loss over the (B, S*A) action tokens: what the actor role computes."""
    inputs = PolicyLossInputs(
        outputs.log_probs, micro_batch["old_log_probs"], micro_batch["advantages"], micro_batch["response_mask"]
    )
    loss, metrics = get_policy_loss("ppo")(inputs, normalizer=normalizer)
    return LossOutput(loss, metrics)


def _reference(batch: dict[str, torch.Tensor], temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        log_probs, entropy = action_log_probs(
            reference_vla().eval(),
            batch["instruction_ids"],
            batch["instruction_mask"],
            batch["pixel_values"],
            batch["action_tokens"],
            temperature,
        )
    mask = batch["response_mask"]
    return log_probs * mask, entropy * mask


@pytest.mark.parametrize("max_tokens", [2000, 150])
def test_forward_gives_masked_action_log_probs_in_any_micro_batching(max_tokens: int) -> None:
    engine = FSDPEngine.from_config(vla_engine_config(max_tokens=max_tokens))
    batch = trajectory_batch(engine.hf_config, batch=5, steps=3)
    plan = engine._plan(batch, ForwardSpec())
    assert (len(plan) == 1) == (max_tokens == 2000)
    outputs = engine.forward(batch, ForwardSpec(entropy=True, temperature=1.6))
    expected_lp, expected_entropy = _reference(batch, 1.6)
    assert outputs.log_probs is not None and outputs.entropy is not None
    assert outputs.log_probs.shape == (5, 3 * 4)
    torch.testing.assert_close(outputs.log_probs, expected_lp, atol=1e-5, rtol=0)
    torch.testing.assert_close(outputs.entropy, expected_entropy, atol=1e-5, rtol=0)


def test_every_step_is_computed_without_response_only() -> None:
    engine = FSDPEngine.from_config(vla_engine_config())
    batch = trajectory_batch(engine.hf_config, batch=3, steps=2)
    outputs = engine.forward(batch, ForwardSpec(response_only=False))
    with torch.no_grad():
        expected, _ = action_log_probs(
            reference_vla().eval(),
            batch["instruction_ids"],
            batch["instruction_mask"],
            batch["pixel_values"],
            batch["action_tokens"],
            1.0,
        )
    torch.testing.assert_close(outputs.log_probs, expected, atol=1e-5, rtol=0)


def test_a_ppo_step_raises_the_log_probs_of_positive_advantage_actions() -> None:
    engine = FSDPEngine.from_config(vla_engine_config(max_tokens=150, lr=3e-3))
    batch = with_ppo_fields(trajectory_batch(engine.hf_config, batch=6, steps=3))
    before = engine.forward(batch, ForwardSpec()).log_probs
    assert before is not None
    batch["old_log_probs"] = before.clone()
    result = engine.train_step(batch, ppo_loss_fn, ForwardSpec())
    assert not result.skipped and result.num_micro_batches > 1 and engine.global_step == 1
    assert result.normalizer.num_tokens == int(batch["response_mask"].sum())
    after = engine.forward(batch, ForwardSpec()).log_probs
    assert after is not None
    mask = batch["response_mask"].bool()
    gain = ((after - before) * batch["advantages"])[mask].sum()
    assert gain > 0


def test_gradients_equal_one_plain_forward_of_the_whole_batch() -> None:
    engine = FSDPEngine.from_config(vla_engine_config(max_tokens=150))
    batch = with_ppo_fields(trajectory_batch(engine.hf_config, batch=5, steps=3))
    gradients = engine.compute_gradients(batch, ppo_loss_fn, ForwardSpec())
    model = reference_vla()
    log_probs, _ = action_log_probs(
        model, batch["instruction_ids"], batch["instruction_mask"], batch["pixel_values"], batch["action_tokens"], 1.0
    )
    loss, _ = ppo_loss_fn(
        ForwardOutput(log_probs * batch["response_mask"], None, None),
        batch,
        LossNormalizer.from_mask(batch["response_mask"]),
    )
    loss.backward()
    expected = {f"backbone.{name}": p.grad for name, p in model.named_parameters() if p.grad is not None}
    assert gradients.keys() == expected.keys()
    for name, grad in expected.items():
        torch.testing.assert_close(gradients[name], grad, atol=1e-6, rtol=1e-4, msg=name)


def test_checkpoint_resumes_and_export_reloads_with_the_word_tokenizer(tmp_path: Path) -> None:
    source = tmp_path / "source"
    reference_vla().save_pretrained(source)
    WordTokenizer.from_texts(["go to the red ball"]).save_pretrained(source)
    engine = FSDPEngine.from_config(vla_engine_config(str(source)))
    batch = with_ppo_fields(trajectory_batch(engine.hf_config, batch=4, steps=2))
    engine.train_step(batch, ppo_loss_fn, ForwardSpec())
    engine.save_checkpoint(tmp_path / "ckpt")
    first = engine.train_step(batch, ppo_loss_fn, ForwardSpec())
    resumed = FSDPEngine.from_config(vla_engine_config(str(source)))
    assert resumed.load_checkpoint(tmp_path / "ckpt") == 1
    second = resumed.train_step(batch, ppo_loss_fn, ForwardSpec())
    assert second.loss == pytest.approx(first.loss, abs=1e-7)
    exported = engine.export_hf(tmp_path / "export")
    assert (exported / "word_tokenizer.json").is_file()
    assert json.loads((exported / "config.json").read_text())["model_type"] == "tiny_vla"
    reloaded = TinyVLAForActionChunking.from_pretrained(exported).eval()
    with torch.no_grad():
        expected, _ = action_log_probs(
            reloaded,
            batch["instruction_ids"],
            batch["instruction_mask"],
            batch["pixel_values"],
            batch["action_tokens"],
            1.0,
        )
    outputs = engine.forward(batch, ForwardSpec())
    torch.testing.assert_close(outputs.log_probs, expected * batch["response_mask"], atol=1e-6, rtol=0)


def test_unsupported_settings_and_bad_batches_are_refused(tmp_path: Path) -> None:
    mapping = {"model_type": "tiny_vla", **SMALL}
    with pytest.raises(TrainConfigError, match="value_head=True"):
        FSDPEngine.from_config(TrainEngineConfig(model=ModelConfig(hf_config=mapping, value_head=True), device="cpu"))
    engine = FSDPEngine.from_config(vla_engine_config())
    batch = trajectory_batch(engine.hf_config, batch=2, steps=2)
    with pytest.raises(TrainConfigError, match="no value head"):
        engine.forward(batch, ForwardSpec(values=True))
    without_pixels = {k: v for k, v in batch.items() if k != "pixel_values"}
    with pytest.raises(BatchError, match="missing \\['pixel_values'\\]"):
        engine.forward(without_pixels, ForwardSpec())
    with pytest.raises(BatchError, match=r"response_mask must be \(B, S\*A\)"):
        engine.forward({**batch, "response_mask": batch["response_mask"][:, :3]}, ForwardSpec())
    small_vocab = tmp_path / "small_vocab"
    reference_vla().save_pretrained(small_vocab)
    WordTokenizer.from_texts([" ".join(f"w{i}" for i in range(20))]).save_pretrained(small_vocab)
    with pytest.raises(Exception, match=f"vocab_size is {small_config().vocab_size}"):
        FSDPEngine.from_config(vla_engine_config(str(small_vocab)))


def test_a_config_object_builds_the_same_model_as_its_mapping() -> None:
    from_mapping = FSDPEngine.from_config(vla_engine_config())
    from_object = FSDPEngine.from_config(vla_engine_config(model=ModelConfig(hf_config=small_config(), init_seed=3)))
    batch = trajectory_batch(small_config(), batch=3, steps=2)
    assert isinstance(from_object.hf_config, type(small_config()))
    torch.testing.assert_close(
        from_object.forward(batch, ForwardSpec()).log_probs, from_mapping.forward(batch, ForwardSpec()).log_probs
    )
