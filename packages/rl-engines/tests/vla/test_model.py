"""The tiny VLA: shapes, save/load round trip, AutoConfig, action log-probs against an independent computation,
the word tokenizer and the env check."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from _vla_helpers import small_config, small_model, trajectory_batch
from transformers import AutoConfig

from rl_engines.vla import (
    MODEL_TYPE,
    TinyVLAConfig,
    TinyVLAForActionChunking,
    VLAError,
    WordTokenizer,
    action_log_probs,
    check_policy_matches_env,
)


def test_default_model_is_about_100k_parameters_and_emits_one_chunk() -> None:
    config = TinyVLAConfig()
    model = TinyVLAForActionChunking(config)
    assert 80_000 < sum(p.numel() for p in model.parameters()) < 130_000
    ids = torch.tensor([[3, 4, 5], [6, 0, 0]])
    logits = model(ids, (ids > 0).long(), torch.zeros(2, *config.image_shape, dtype=torch.uint8))
    assert logits.shape == (2, config.chunk_size * config.action_dims, config.action_bins)


def test_padding_words_do_not_change_the_logits() -> None:
    model = small_model()
    pixels = torch.randint(0, 256, (1, 3, 16, 16), dtype=torch.uint8)
    short = model(torch.tensor([[3, 4]]), torch.tensor([[1, 1]]), pixels)
    padded = model(torch.tensor([[3, 4, 0, 0]]), torch.tensor([[1, 1, 0, 0]]), pixels)
    torch.testing.assert_close(short, padded)


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    model = small_model(seed=3)
    model.save_pretrained(tmp_path)
    assert AutoConfig.from_pretrained(tmp_path).model_type == MODEL_TYPE
    loaded = TinyVLAForActionChunking.from_pretrained(tmp_path).eval()
    assert loaded.config.image_shape == (3, 16, 16) and loaded.config.conv_channels == (4, 8)
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    batch = trajectory_batch(model.config, batch=2, steps=1)
    args = (batch["instruction_ids"], batch["instruction_mask"], batch["pixel_values"][:, 0])
    assert torch.equal(model(*args), loaded(*args))


@torch.no_grad()
def test_action_log_probs_match_an_independent_per_step_loop() -> None:
    model = small_model(seed=1)
    config = model.config
    batch = trajectory_batch(config, batch=3, steps=4)
    temperature = 1.6
    log_probs, entropy = action_log_probs(
        model,
        batch["instruction_ids"],
        batch["instruction_mask"],
        batch["pixel_values"],
        batch["action_tokens"],
        temperature,
    )
    width = config.action_tokens_per_chunk
    assert log_probs.shape == entropy.shape == (3, 4 * width)
    for b in range(3):
        for s in range(4):
            logits = model(
                batch["instruction_ids"][b : b + 1],
                batch["instruction_mask"][b : b + 1],
                batch["pixel_values"][b, s : s + 1],
            )
            probs = torch.softmax(logits[0].double() / temperature, dim=-1)
            for a in range(width):
                token = int(batch["action_tokens"][b, s, a])
                expected = float(torch.log(probs[a, token]))
                assert float(log_probs[b, s * width + a]) == pytest.approx(expected, abs=1e-5)
                expected_entropy = float(-(probs[a] * probs[a].log()).sum())
                assert float(entropy[b, s * width + a]) == pytest.approx(expected_entropy, abs=1e-5)


def test_selected_steps_only_are_computed_and_gradients_flow() -> None:
    model = small_model(seed=2).train()
    batch = trajectory_batch(model.config, batch=2, steps=3)
    steps = torch.tensor([[True, False, True], [False, False, True]])
    inputs = (batch["instruction_ids"], batch["instruction_mask"], batch["pixel_values"], batch["action_tokens"], 1.0)
    every, _ = action_log_probs(model, *inputs)
    some, _ = action_log_probs(model, *inputs, steps=steps)
    token_steps = steps.repeat_interleave(model.config.action_tokens_per_chunk, dim=1)
    torch.testing.assert_close(some[token_steps], every[token_steps])
    assert torch.all(some[~token_steps] == 0)
    some.sum().backward()
    assert model.action_head.weight.grad is not None and model.action_head.weight.grad.abs().sum() > 0


def test_bad_shapes_and_temperature_are_refused() -> None:
    model = small_model()
    batch = trajectory_batch(model.config, batch=2, steps=2)
    with pytest.raises(VLAError, match="temperature > 0"):
        action_log_probs(
            model,
            batch["instruction_ids"],
            batch["instruction_mask"],
            batch["pixel_values"],
            batch["action_tokens"],
            0.0,
        )
    with pytest.raises(VLAError, match="A must be the model's chunk_size"):
        action_log_probs(
            model,
            batch["instruction_ids"],
            batch["instruction_mask"],
            batch["pixel_values"],
            batch["action_tokens"][..., :1],
            1.0,
        )
    with pytest.raises(VLAError, match="image_shape"):
        model(batch["instruction_ids"], batch["instruction_mask"], torch.zeros(2, 3, 8, 8, dtype=torch.uint8))
    with pytest.raises(VLAError, match="max_instruction_len=6"):
        model(torch.ones(2, 7, dtype=torch.int64), torch.ones(2, 7), batch["pixel_values"][:, 0])
    with pytest.raises(VLAError, match="hidden_size=10 must be a multiple"):
        small_config(hidden_size=10, num_attention_heads=4)


def test_word_tokenizer_round_trip_and_unknown_words(tmp_path: Path) -> None:
    tokenizer = WordTokenizer.from_texts(["go to the red ball", "pick up the grey key"])
    ids, mask = tokenizer.encode(["Go to the red key", "pick up"])
    assert ids.shape == mask.shape == (2, 5)
    assert mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    assert tokenizer.decode(ids) == ["go to the red key", "pick up"]
    tokenizer.save_pretrained(tmp_path)
    loaded = WordTokenizer.from_pretrained(tmp_path)
    assert torch.equal(loaded.encode(["go to the red key"])[0], tokenizer.encode(["go to the red key"])[0])
    assert tokenizer.encode(["go to the purple box"])[0][0].tolist() == [
        tokenizer.ids["go"],
        tokenizer.ids["to"],
        tokenizer.ids["the"],
        1,
        1,
    ]
    with pytest.raises(VLAError, match=r"outside the tokenizer's vocabulary: \['purple', 'box'\]"):
        tokenizer.encode(["go to the purple box"], strict=True)
    with pytest.raises(VLAError, match="max_length=2"):
        tokenizer.encode(["go to the red ball"], max_length=2)
    with pytest.raises(VLAError, match=r"has no word_tokenizer\.json"):
        WordTokenizer.from_pretrained(tmp_path / "missing")


@dataclass(frozen=True)
class _Spec:
    name: str = "babyai"
    image_shape: tuple[int, int, int] = (3, 16, 16)
    action_dims: int = 2
    action_bins: int = 5


def test_check_policy_matches_env_names_the_field() -> None:
    config = small_config()
    check_policy_matches_env(config, _Spec())
    with pytest.raises(VLAError, match=r"action_bins=5 does not match env 'babyai''s action_bins=3.*action_bins=3"):
        check_policy_matches_env(config, _Spec(action_bins=3))
    with pytest.raises(VLAError, match="action_dims=2 does not match"):
        check_policy_matches_env(config, _Spec(action_dims=7))
    with pytest.raises(VLAError, match="image_shape"):
        check_policy_matches_env(config, _Spec(image_shape=(3, 56, 56)))
