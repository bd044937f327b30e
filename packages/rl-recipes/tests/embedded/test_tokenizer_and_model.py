"""The local tokenizer round-trips every dataset string; the tiny model generates with it."""

from __future__ import annotations

from pathlib import Path

import torch

from rl_recipes.embedded import (
    SPECIAL_TOKENS,
    ArithmeticSpec,
    build_embedded_model,
    build_embedded_tokenizer,
    embedded_model_config,
    generate_arithmetic_splits,
    load_embedded_tokenizer,
    save_embedded_tokenizer,
)
from rl_recipes.tasks import build_prompt


def _dataset_strings() -> list[str]:
    train, heldout = generate_arithmetic_splits(300, 100, seed=0, spec=ArithmeticSpec(("+", "-", "*"), 0, 999, True))
    strings = []
    for row in train + heldout:
        prompt = build_prompt(row["question"])
        strings += [row["question"], row["answer"], prompt, f"{prompt} {row['answer']}"]
    return strings


def test_round_trips_every_dataset_string_after_save_and_reload(tmp_path: Path) -> None:
    built = build_embedded_tokenizer()
    reloaded = load_embedded_tokenizer(save_embedded_tokenizer(built, tmp_path / "tok"))
    for tokenizer in (built, reloaded):
        for text in _dataset_strings():
            ids = tokenizer(text)["input_ids"]
            assert tokenizer.unk_token_id not in ids, text
            assert tokenizer.decode(ids) == text
    assert reloaded.get_vocab() == built.get_vocab()


def test_special_tokens() -> None:
    tokenizer = build_embedded_tokenizer()
    assert [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3]
    assert (tokenizer.pad_token, tokenizer.bos_token, tokenizer.eos_token) == ("<pad>", "<bos>", "<eos>")
    ids = tokenizer("12")["input_ids"] + [tokenizer.eos_token_id, tokenizer.pad_token_id]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "12"


def test_model_config_matches_tokenizer() -> None:
    tokenizer = build_embedded_tokenizer()
    config = embedded_model_config(tokenizer)
    assert config.vocab_size == len(tokenizer)
    assert (config.pad_token_id, config.eos_token_id) == (tokenizer.pad_token_id, tokenizer.eos_token_id)


def test_model_is_seeded_and_leaves_global_rng_alone() -> None:
    state = torch.random.get_rng_state()
    a, b, c = build_embedded_model(1), build_embedded_model(1), build_embedded_model(2)
    assert torch.equal(torch.random.get_rng_state(), state)
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb), name
    assert not all(torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters(), strict=True))


def test_tiny_model_generates() -> None:
    tokenizer = build_embedded_tokenizer()
    model = build_embedded_model(seed=0, tokenizer=tokenizer)
    assert sum(p.numel() for p in model.parameters()) < 1_000_000
    prompts = [build_prompt("What is 1 + 2?"), build_prompt("What is 10 + 20?")]
    batch = tokenizer(prompts, return_tensors="pt", padding=True)
    out = model.generate(**batch, max_new_tokens=4, do_sample=False)
    assert out.shape == (2, batch["input_ids"].shape[1] + 4)
    texts = tokenizer.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    assert all(isinstance(text, str) for text in texts)


def test_auto_tokenizer_of_a_saved_model_folder_is_the_embedded_one(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    # transformers swaps in its own byte-level tokenizer for some model types (qwen2); the embedded one must survive.
    tokenizer = build_embedded_tokenizer()
    build_embedded_model(seed=0, tokenizer=tokenizer).save_pretrained(str(tmp_path))
    tokenizer.save_pretrained(str(tmp_path))
    loaded = AutoTokenizer.from_pretrained(str(tmp_path))
    for text in _dataset_strings()[:40]:
        assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"], text
    assert (loaded.eos_token_id, loaded.pad_token_id, loaded.padding_side) == (2, 0, "left")
