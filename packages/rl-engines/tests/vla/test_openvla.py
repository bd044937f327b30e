"""The OpenVLA-OFT path on a tiny random test-double checkpoint (`_fake_openvla`, not OpenVLA): loading through the
remote-code loader, the prompt and action-block layout, log-probs over exactly the 256 action-token ids at the
sampling temperature, decoding bins to LIBERO actions with the checkpoint's statistics, and one PPO step of the train
engine whose weights the policy then receives (checksum verified) and samples with the engine's log-probs.

`RL_ENGINES_TEST_DEVICE=cuda` runs the model on the GPU in bfloat16 (the CPU runs float32).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from _fake_openvla import BASE_VOCAB, BINS, CHUNK, DIMS, MASK, Q01, Q99, write_fake_openvla
from _vla_helpers import small_config, small_model
from test_vla_engine import ppo_loss_fn

from rl_engines.sync import ReferenceTransport, WeightSync, WeightSyncConfig
from rl_engines.training import (
    ForwardSpec,
    FSDPEngine,
    MicroBatchConfig,
    ModelConfig,
    OptimizerConfig,
    TrainConfigError,
    TrainEngineConfig,
)
from rl_engines.vla import (
    ActionTokenizer,
    OpenVLAActions,
    OpenVLAPrompt,
    VLAError,
    VLAPolicy,
    WordInstructions,
    WordTokenizer,
    action_log_probs,
    check_policy_matches_env,
    instruction_encoder,
    load_openvla,
    prismatic_pixels,
    read_openvla_spec,
)

TEST_DEVICE = os.environ.get("RL_ENGINES_TEST_DEVICE", "cpu")
DTYPE = torch.bfloat16 if TEST_DEVICE == "cuda" else torch.float32
TOL = 5e-2 if TEST_DEVICE == "cuda" else 1e-5  # bfloat16 logits of two layouts differ by rounding
INSTRUCTIONS = ["put the bowl on the plate", "open the top drawer and put the bowl on it", "open it"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_fake_openvla(tmp_path_factory.mktemp("fake_openvla"))


@pytest.fixture(scope="module")
def actions(checkpoint: Path) -> OpenVLAActions:
    model, spec = load_openvla(checkpoint, DTYPE)
    return OpenVLAActions(model.to(TEST_DEVICE), spec)


def _frames(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 256, (n, 3, 32, 32), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8)


def _reference_logits(actions: OpenVLAActions, prompt: list[int], frame: torch.Tensor) -> torch.Tensor:
    """One row's (A, vocab) logits built the way OpenVLA-OFT lays out its sequence, unpadded, with every position
    attending to every other, read at P + n - 1 + a (written independently of `OpenVLAActions`)."""
    model, spec = actions.model, actions.config
    embed = model.get_input_embeddings()
    ids = torch.tensor([prompt], device=TEST_DEVICE)
    patches = model.projector(model.vision_backbone(prismatic_pixels(frame[None].to(TEST_DEVICE), spec, DTYPE)))
    width = spec.action_tokens_per_chunk
    stop = torch.tensor([[spec.stop_token_id]], device=TEST_DEVICE)
    hidden = torch.cat(
        [embed(ids[:, :1]), patches, embed(ids[:, 1:]), torch.zeros(1, width, patches.shape[2], dtype=DTYPE,
         device=TEST_DEVICE), embed(stop)], dim=1,
    )  # fmt: skip
    full = torch.zeros(1, 1, hidden.shape[1], hidden.shape[1], dtype=DTYPE, device=TEST_DEVICE)
    logits = model.language_model(inputs_embeds=hidden, attention_mask=full).logits[0]
    start = patches.shape[1] + len(prompt) - 1
    return logits[start : start + width]


def test_the_spec_reads_the_folder_and_refuses_what_it_cannot_use(checkpoint: Path, tmp_path: Path) -> None:
    spec = read_openvla_spec(checkpoint)
    assert (spec.chunk_size, spec.action_dims, spec.action_bins) == (CHUNK, DIMS, BINS)
    assert spec.vocab_size == BASE_VOCAB and spec.action_tokens_per_chunk == CHUNK * DIMS
    assert spec.unnorm_key == "libero_goal_no_noops" and spec.num_patches == 4
    two = Path(shutil.copytree(checkpoint, tmp_path / "two"))
    stats = json.loads((two / "dataset_statistics.json").read_text())
    stats["libero_10_no_noops"] = stats["libero_goal_no_noops"]
    (two / "dataset_statistics.json").write_text(json.dumps(stats))
    with pytest.raises(VLAError, match="set unnorm_key"):
        read_openvla_spec(two)
    (two / "rl_vla.json").write_text(json.dumps({"chunk_size": CHUNK, "action_dims": DIMS, "unnorm_key": "libero_10"}))
    assert read_openvla_spec(two).unnorm_key == "libero_10_no_noops"  # siiRL's _no_noops fallback
    (two / "rl_vla.json").write_text(json.dumps({"chunk": 8}))
    with pytest.raises(VLAError, match="unknown keys"):
        read_openvla_spec(two)
    (two / "rl_vla.json").write_text(json.dumps({"action_dims": 6, "unnorm_key": "libero_10"}))
    with pytest.raises(VLAError, match="action_dims=6"):
        read_openvla_spec(two)
    (two / "preprocessor_config.json").unlink()
    with pytest.raises(VLAError, match=r"preprocessor_config\.json"):
        read_openvla_spec(two)


def test_the_prompt_is_openvlas_with_the_empty_token_last(checkpoint: Path) -> None:
    prompt = OpenVLAPrompt(checkpoint)
    ids = prompt.encode("Put the bowl on the plate")
    words = prompt.tokenizer.convert_ids_to_tokens(list(ids))
    assert words == ["<s>", "In:", "What", "action", "should", "the", "robot", "take", "to", "put", "the", "bowl",
                     "on", "the", "plate", "?", "Out:", "\u2581"]  # fmt: skip
    input_ids, mask = prompt.encode_batch(INSTRUCTIONS)
    assert input_ids.shape == mask.shape and tuple(input_ids[0, : len(ids)].tolist()) == ids
    assert int(mask[2].sum()) == len(prompt.encode(INSTRUCTIONS[2]))
    assert "put the bowl on the plate" in prompt.decode(ids)


def test_the_folder_picks_the_instruction_encoder(checkpoint: Path, tmp_path: Path) -> None:
    encoder = instruction_encoder(checkpoint)
    assert isinstance(encoder, OpenVLAPrompt)
    assert encoder.encode(INSTRUCTIONS[0]) == OpenVLAPrompt(checkpoint).encode(INSTRUCTIONS[0])
    tiny = tmp_path / "tiny"
    small_model().save_pretrained(tiny)
    WordTokenizer.from_texts(["go to the red ball"]).save_pretrained(tiny)
    words = instruction_encoder(tiny)
    assert isinstance(words, WordInstructions) and words.max_length == small_config().max_instruction_len
    assert words.decode(words.encode("Go to the red ball")) == "go to the red ball"


@torch.no_grad()
def test_log_probs_are_the_restricted_softmax_of_the_oft_layout(checkpoint: Path, actions: OpenVLAActions) -> None:
    prompt = OpenVLAPrompt(checkpoint)
    ids, mask = prompt.encode_batch(INSTRUCTIONS)
    frames = _frames(3)
    spec = actions.config
    width, temperature = spec.action_tokens_per_chunk, 1.6
    bins = torch.randint(0, BINS, (3, 1, width), generator=torch.Generator().manual_seed(1))
    log_probs, entropy = action_log_probs(
        actions, ids.to(TEST_DEVICE), mask.to(TEST_DEVICE), frames[:, None].to(TEST_DEVICE), bins.to(TEST_DEVICE),
        temperature,
    )  # fmt: skip
    tokenizer = ActionTokenizer(BINS, BASE_VOCAB)
    for row, text in enumerate(INSTRUCTIONS):
        logits = _reference_logits(actions, list(prompt.encode(text)), frames[row]).float()
        # The action tokens are exactly the 256 ids vocab_size - 256 .. vocab_size - 1 (bin b <-> id 319 - b).
        token_ids = tokenizer.bins_to_tokens(torch.arange(BINS)).to(TEST_DEVICE)
        assert sorted(token_ids.tolist()) == list(range(BASE_VOCAB - BINS, BASE_VOCAB))
        expected = torch.log_softmax(logits[:, token_ids] / temperature, dim=-1)
        chosen = expected.gather(-1, bins[row, 0, :, None].to(TEST_DEVICE)).squeeze(-1)
        torch.testing.assert_close(log_probs[row], chosen, atol=TOL, rtol=0)
        torch.testing.assert_close(entropy[row], -(expected.exp() * expected).sum(-1), atol=TOL, rtol=0)
    # A row's log-probs do not depend on its batch's padding.
    alone, _ = action_log_probs(
        actions, ids[2:, : int(mask[2].sum())].to(TEST_DEVICE), mask[2:, : int(mask[2].sum())].to(TEST_DEVICE),
        frames[2:, None].to(TEST_DEVICE), bins[2:].to(TEST_DEVICE), temperature,
    )  # fmt: skip
    torch.testing.assert_close(alone[0], log_probs[2], atol=TOL, rtol=0)


def test_bins_decode_to_libero_actions_with_the_checkpoints_statistics(checkpoint: Path) -> None:
    spec = read_openvla_spec(checkpoint)
    bins = torch.tensor([[0, 64, 127, 128, 200, 254, 255]])
    actions = spec.decode_actions(bins)
    centres = ActionTokenizer(BINS, BASE_VOCAB).bins_to_values(bins)
    q01, q99 = torch.tensor(Q01), torch.tensor(Q99)
    expected = torch.where(torch.tensor(MASK), 0.5 * (centres + 1) * (q99 - q01) + q01, centres)
    torch.testing.assert_close(actions, expected)
    assert float(actions[0, -1]) == float(centres[0, -1])  # the gripper (mask false) stays normalised
    low, high = spec.env_action_bounds()
    assert low[:6] == Q01[:6] and high[:6] == Q99[:6] and (low[6], high[6]) == (-1.0, 1.0)


class _LiberoSpec:
    name, image_shape, action_dims, action_bins = "libero", (3, 128, 128), 7, 256


def test_check_policy_matches_env_covers_openvla(checkpoint: Path) -> None:
    spec = read_openvla_spec(checkpoint)
    check_policy_matches_env(spec, _LiberoSpec())  # frames of any size are resized to the backbones'
    six = type("SixDims", (_LiberoSpec,), {"action_dims": 6})()
    with pytest.raises(VLAError, match="action_dims=7 does not match"):
        check_policy_matches_env(spec, six)
    gray = type("Gray", (_LiberoSpec,), {"image_shape": (1, 128, 128)})()
    with pytest.raises(VLAError, match="image_shape"):
        check_policy_matches_env(spec, gray)


def test_a_missing_extra_is_named(tmp_path: Path, checkpoint: Path) -> None:
    broken = Path(shutil.copytree(checkpoint, tmp_path / "needs_timm"))
    code = broken / "modeling_fake_prismatic.py"
    code.write_text("import timm_is_not_installed_here\n" + code.read_text())
    with pytest.raises(VLAError, match=r"pip install 'rl-engines\[openvla\]'"):
        load_openvla(broken, torch.float32)


def _engine_config(checkpoint: Path, **model: object) -> TrainEngineConfig:
    return TrainEngineConfig(
        model=ModelConfig(path=str(checkpoint), **model),  # pyright: ignore[reportArgumentType]
        optimizer=OptimizerConfig(lr=1e-3, max_grad_norm=None),
        micro_batch=MicroBatchConfig(max_tokens_per_micro_batch=80),  # about one trajectory per micro-batch
        device=TEST_DEVICE,
    )


def test_settings_the_path_does_not_build_are_refused_at_load(checkpoint: Path) -> None:
    for name in ("value_head", "gradient_checkpointing", "broadcast_from_rank0"):
        with pytest.raises(TrainConfigError, match=f"ModelConfig.{name}=True is not built for an OpenVLA-OFT"):
            ModelConfig(path=str(checkpoint), **{name: True})  # pyright: ignore[reportArgumentType]
    with pytest.raises(TrainConfigError, match=r"set model\.path to the checkpoint folder"):
        ModelConfig(hf_config={"model_type": "openvla"})  # a random init cannot run the checkpoint's own code


def test_a_train_step_moves_the_weights_and_the_policy_receives_them(checkpoint: Path, tmp_path: Path) -> None:
    engine = FSDPEngine.from_config(_engine_config(checkpoint))
    prompt = OpenVLAPrompt(checkpoint)
    ids, mask = prompt.encode_batch(INSTRUCTIONS)
    steps, width = 2, CHUNK * DIMS
    g = torch.Generator().manual_seed(5)
    finish = torch.tensor([4, 1, 3])  # env steps: a trajectory's valid tokens are the first finish_step * D
    response_mask = (torch.arange(steps * width) < finish[:, None] * DIMS).long()
    batch = {
        "instruction_ids": ids,
        "instruction_mask": mask,
        "pixel_values": torch.randint(0, 256, (3, steps, 3, 32, 32), generator=g, dtype=torch.uint8),
        "action_tokens": torch.randint(0, BINS, (3, steps, width), generator=g),
        "response_mask": response_mask,
    }
    before = engine.forward(batch, ForwardSpec(temperature=1.6)).log_probs
    assert before is not None and before.shape == (3, steps * width)
    assert bool((before[response_mask.bool()] < 0).all()) and bool((before[~response_mask.bool()] == 0).all())
    advantages = torch.where(torch.arange(3)[:, None] == 0, 1.0, -1.0) * response_mask
    engine.train_step(
        {**batch, "old_log_probs": before, "advantages": advantages}, ppo_loss_fn, ForwardSpec(temperature=1.6)
    )
    after = engine.forward(batch, ForwardSpec(temperature=1.6)).log_probs
    assert after is not None
    # The step ascends the PPO surrogate: advantage-weighted log-probs rise.
    assert float((advantages * (after - before)).sum()) > 0

    policy = VLAPolicy.from_pretrained(checkpoint, device=TEST_DEVICE, dtype=DTYPE)
    stale = policy.weights_checksum()
    # What the Trainer hands the rollout side (the actor's config) selects the same path and folder.
    assert VLAPolicy(engine.hf_config, dtype=DTYPE).weights_checksum() == stale
    # The engine keeps float32 weights (bfloat16 would round lr-sized steps away); the sync sends the policy's dtype.
    sync_config = WeightSyncConfig(inline_calls=True, dtype=str(DTYPE).removeprefix("torch."))
    sync = WeightSync([policy], ReferenceTransport(), sync_config)  # pyright: ignore[reportArgumentType]
    report = sync.sync(engine.export_weights(), version=1)
    sync.close()
    assert report.checksum == policy.weights_checksum() != stale and policy.weight_version() == 1
    bins, log_probs = policy.act(
        ids, mask, batch["pixel_values"][:, 0], 1.6, torch.Generator(TEST_DEVICE).manual_seed(0)
    )
    assert bins.shape == (3, CHUNK, DIMS)
    check = {**batch, "pixel_values": batch["pixel_values"][:, :1], "action_tokens": bins.view(3, 1, width).cpu()}
    check["response_mask"] = torch.ones(3, width, dtype=torch.int64)
    engine_log_probs = engine.forward(check, ForwardSpec(temperature=1.6)).log_probs
    torch.testing.assert_close(log_probs.cpu(), engine_log_probs, atol=TOL, rtol=0)
    actions = policy.config.decode_actions(bins.cpu())  # pyright: ignore[reportAttributeAccessIssue]
    assert actions.shape == (3, CHUNK, DIMS) and bool((actions[..., -1].abs() <= 1).all())
    # The exported folder reloads through the same path (remote code and side files copied) with the same weights.
    exported = engine.export_hf(tmp_path / "export", dtype=DTYPE)
    assert VLAPolicy.from_pretrained(exported, dtype=DTYPE).weights_checksum() == policy.weights_checksum()
