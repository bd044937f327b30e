"""VLAPolicy: seeded and greedy sampling, log-probs of the chosen bins, and weight syncs from the train engine
verified by version and checksum, after which its log-probs equal the engine's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _vla_helpers import small_config, trajectory_batch, vla_engine_config, with_ppo_fields
from test_vla_engine import ppo_loss_fn

from rl_engines.rollout import EngineStateError, UnknownParameterError, UnversionedWeightsError
from rl_engines.sync import DiskTransport, ReferenceTransport, SyncError, WeightSync, WeightSyncConfig
from rl_engines.training import ForwardSpec, FSDPEngine
from rl_engines.vla import VLAPolicy, action_log_probs


def _observations(n: int = 6, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    batch = trajectory_batch(small_config(), batch=n, steps=1, seed=seed)
    return batch["instruction_ids"], batch["instruction_mask"], batch["pixel_values"][:, 0]


def test_sampling_is_seeded_and_returns_the_chosen_bins_log_probs() -> None:
    policy = VLAPolicy(small_config(), init_seed=1)
    ids, mask, pixels = _observations()
    bins, log_probs = policy.act(ids, mask, pixels, 1.6, torch.Generator().manual_seed(7))
    again, _ = policy.act(ids, mask, pixels, 1.6, torch.Generator().manual_seed(7))
    assert bins.shape == (6, 2, 2) and bins.dtype == torch.int64 and log_probs.shape == (6, 4)
    assert torch.equal(bins, again)
    assert int(bins.min()) >= 0 and int(bins.max()) < 5
    expected, _ = action_log_probs(policy.model, ids, mask, pixels[:, None], bins.view(6, 1, 4), 1.6)
    torch.testing.assert_close(log_probs, expected, atol=1e-6, rtol=0)


def test_samples_follow_the_restricted_softmax_and_greedy_takes_the_argmax() -> None:
    policy = VLAPolicy(small_config(), init_seed=2)
    ids, mask, pixels = _observations(n=1)
    count = 4000
    bins, _ = policy.act(
        ids.expand(count, -1), mask.expand(count, -1), pixels.expand(count, -1, -1, -1), 0.5, torch.Generator()
    )
    logits = policy.model(ids, mask, pixels)[0]
    probs = torch.softmax(logits / 0.5, dim=-1)
    frequencies = torch.nn.functional.one_hot(bins.view(count, 4), 5).float().mean(0)
    torch.testing.assert_close(frequencies, probs, atol=0.04, rtol=0)
    greedy, greedy_lp = policy.act(ids, mask, pixels, 0.0)
    assert torch.equal(greedy.view(4), logits.argmax(-1))
    torch.testing.assert_close(greedy_lp[0], torch.log_softmax(logits, -1).max(-1).values, atol=1e-6, rtol=0)


def _synced_pair(transport: object, tmp_path: Path) -> tuple[FSDPEngine, VLAPolicy, dict]:
    engine = FSDPEngine.from_config(vla_engine_config())
    batch = with_ppo_fields(trajectory_batch(engine.hf_config, batch=4, steps=2))
    engine.train_step(batch, ppo_loss_fn, ForwardSpec())
    policy = VLAPolicy(small_config(), init_seed=99)
    sync = WeightSync([policy], transport, WeightSyncConfig(inline_calls=True))  # type: ignore[list-item]
    report = sync.sync(engine.export_weights(), version=1)
    sync.close()
    assert report.checksum == policy.weights_checksum(
        sorted(name for name, _ in engine.network.backbone.named_parameters())
    )
    return engine, policy, batch


@pytest.mark.parametrize("transport", ["reference", "disk"])
def test_after_a_sync_the_policy_log_probs_equal_the_train_engines(transport: str, tmp_path: Path) -> None:
    chosen = ReferenceTransport() if transport == "reference" else DiskTransport(tmp_path / "sync")
    engine, policy, _ = _synced_pair(chosen, tmp_path)
    assert policy.weight_version() == 1
    ids, mask, pixels = _observations(n=5, seed=3)
    bins, log_probs = policy.act(ids, mask, pixels, 1.3, torch.Generator().manual_seed(0))
    batch = {
        "instruction_ids": ids,
        "instruction_mask": mask,
        "pixel_values": pixels[:, None],
        "action_tokens": bins.view(5, 1, 4),
        "response_mask": torch.ones(5, 4, dtype=torch.int64),
    }
    outputs = engine.forward(batch, ForwardSpec(temperature=1.3))
    torch.testing.assert_close(outputs.log_probs, log_probs, atol=1e-6, rtol=0)


def test_unversioned_paused_and_rejected_updates(tmp_path: Path) -> None:
    policy = VLAPolicy(small_config())
    ids, mask, pixels = _observations(n=2)
    before = policy.weights_checksum()
    with pytest.raises(UnknownParameterError, match="does not have"):
        policy.update_weights_from_tensors([("action_head.bias", torch.zeros(5)), ("no_such.weight", torch.zeros(3))])
    assert policy.weights_checksum() == before and policy.weight_version() == 0
    policy.update_weights_from_tensors([("action_head.bias", torch.ones(5))])
    assert policy.weight_version() == -1
    with pytest.raises(UnversionedWeightsError, match="set a version"):
        policy.act(ids, mask, pixels, 1.0)
    policy.set_weight_version(3)
    policy.pause("abort")
    with pytest.raises(EngineStateError, match="paused"):
        policy.act(ids, mask, pixels, 1.0)
    policy.resume()
    assert policy.act(ids, mask, pixels, 1.0)[0].shape == (2, 2, 2)


def test_a_sync_of_another_dtype_fails_verification_and_stays_paused() -> None:
    engine = FSDPEngine.from_config(vla_engine_config())
    policy = VLAPolicy(small_config(), dtype=torch.bfloat16)
    sync = WeightSync([policy], ReferenceTransport(), WeightSyncConfig(inline_calls=True))  # type: ignore[list-item]
    with pytest.raises(SyncError, match="checksum"):
        sync.sync(engine.export_weights(), version=1)
    ids, mask, pixels = _observations(n=1)
    with pytest.raises(EngineStateError, match="paused"):
        policy.act(ids, mask, pixels, 1.0)
    fixed = WeightSync([policy], ReferenceTransport(), WeightSyncConfig(inline_calls=True, dtype="bfloat16"))  # type: ignore[list-item]
    fixed.sync(engine.export_weights(), version=2)
    assert policy.weight_version() == 2
    assert policy.act(ids, mask, pixels, 1.0)[0].shape == (1, 2, 2)


def test_from_pretrained_loads_an_exported_folder(tmp_path: Path) -> None:
    engine = FSDPEngine.from_config(vla_engine_config())
    folder = engine.export_hf(tmp_path / "export")
    policy = VLAPolicy.from_pretrained(folder, version=4)
    assert policy.weight_version() == 4
    names = [name for name, _ in engine.network.backbone.named_parameters()]
    reference = VLAPolicy(small_config())
    reference.update_weights_from_tensors([(n, t) for bucket in engine.export_weights() for n, t in bucket])
    assert policy.weights_checksum(names) == reference.weights_checksum(names)
