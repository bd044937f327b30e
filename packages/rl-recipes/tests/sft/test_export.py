"""The exported folder: transformers reloads model and tokenizer, with the engine's log-probs and eos/pad set."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from rl_engines.training import (
    ForwardSpec,
    FSDPEngine,
    MicroBatchConfig,
    ModelConfig,
    OptimizerConfig,
    TrainEngineConfig,
)
from rl_recipes.embedded import build_embedded_tokenizer, embedded_model_config
from rl_recipes.sft import LOG_PROBS_ONLY, SFTExample, collate, export_model_folder, response_nll_loss

TOKENIZER = build_embedded_tokenizer()
ROWS = [SFTExample((4, 87, 104), (12, 2)), SFTExample((4, 87), (13, 14, 15, 2))]


def _trained_engine() -> FSDPEngine:
    config = TrainEngineConfig(
        model=ModelConfig(hf_config=embedded_model_config(TOKENIZER), init_seed=1),
        optimizer=OptimizerConfig(lr=1e-2),
        micro_batch=MicroBatchConfig(packing=False),
        device="cpu",
    )
    engine = FSDPEngine.from_config(config)
    batch = collate(ROWS, TOKENIZER.pad_token_id)
    engine.train_step(batch, response_nll_loss, LOG_PROBS_ONLY)
    return engine


def test_reloaded_folder_gives_the_engines_log_probs(tmp_path: Path) -> None:
    engine = _trained_engine()
    folder = export_model_folder(engine, TOKENIZER, tmp_path / "model")
    batch = collate(ROWS, TOKENIZER.pad_token_id)
    expected = engine.forward(batch, ForwardSpec(log_probs=True, response_only=False)).log_probs

    model = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    log_probs = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(-1, batch["input_ids"][:, 1:, None])[..., 0]
    valid = (batch["attention_mask"][:, 1:] * batch["attention_mask"][:, :-1]).bool()
    assert valid.sum() == 9
    torch.testing.assert_close(log_probs[valid], expected[:, 1:][valid], atol=1e-5, rtol=1e-5)

    reloaded = AutoTokenizer.from_pretrained(str(folder))
    assert reloaded.get_vocab() == TOKENIZER.get_vocab()
    assert reloaded.decode(reloaded("What is 2 + 3?")["input_ids"]) == "What is 2 + 3?"
    generation = GenerationConfig.from_pretrained(str(folder))
    assert (generation.eos_token_id, generation.pad_token_id) == (TOKENIZER.eos_token_id, TOKENIZER.pad_token_id)


def test_export_replaces_an_existing_folder_whole(tmp_path: Path) -> None:
    target = tmp_path / "model"
    target.mkdir()
    (target / "stale.txt").write_text("from an earlier run")
    export_model_folder(_trained_engine(), TOKENIZER, target)
    names = sorted(p.name for p in target.iterdir())
    assert "stale.txt" not in names and {"config.json", "model.safetensors", "tokenizer.json"} <= set(names)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no staging or replaced folder left behind


@pytest.mark.parametrize(("existing_eos", "expected"), [(None, 2), (7, [7, 2]), ([2, 7], [2, 7])])
def test_generation_config_keeps_source_eos_and_adds_the_tokenizers(
    tmp_path: Path, existing_eos: int | list[int] | None, expected: int | list[int]
) -> None:
    from rl_recipes.sft._export import _generation_config

    GenerationConfig(eos_token_id=existing_eos, pad_token_id=5).save_pretrained(str(tmp_path))
    config = _generation_config(tmp_path, TOKENIZER)
    assert config.eos_token_id == expected
    assert config.pad_token_id == 5  # a source model's pad token is kept
