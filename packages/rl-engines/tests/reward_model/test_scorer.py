"""The reward-model scorer: scores per sequence, independent of batching and order; truncation; vocabulary and
folder errors; the config's own checks; the load-time tokenizer check."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from rl_engines.reward_model import (
    RewardModelConfig,
    RewardModelError,
    RewardModelScorer,
    TokenizerMode,
    check_reward_model,
)
from rl_engines.training import ModelConfig, TrainConfigError

VOCAB = 16
_POLICY = {"model_type": "llama", "vocab_size": VOCAB}


def _tokenizer(pieces: str) -> object:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, **{piece: index + 2 for index, piece in enumerate(pieces)}}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>")


def _model(seed: int = 0) -> object:
    from transformers import LlamaConfig, LlamaForSequenceClassification

    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=32, num_labels=1, pad_token_id=0,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForSequenceClassification(config)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rm")
    _model().save_pretrained(str(path))
    _tokenizer("abcdefghijklmn").save_pretrained(str(path))
    return path


def test_scores_are_one_per_sequence_and_independent_of_batching_and_order(folder: Path) -> None:
    sequences = [[2, 3, 4, 1], [5, 6, 1], [7, 8, 9, 10, 11, 1], [3]]
    scorer = RewardModelScorer.from_config(RewardModelConfig(path=str(folder), batch_size=3))
    result = scorer.score_ids(sequences)
    assert result.scores.shape == (4,) and result.scores.dtype == torch.float32 and result.truncated == 0
    alone = torch.cat([scorer.score_ids([ids]).scores for ids in sequences])
    torch.testing.assert_close(result.scores, alone, rtol=1e-5, atol=1e-5)  # right padding does not leak in
    reversed_scores = scorer.score_ids(sequences[::-1]).scores
    torch.testing.assert_close(reversed_scores, result.scores.flip(0), rtol=1e-5, atol=1e-5)
    assert len(set(result.scores.tolist())) == 4  # different sequences, different scores


def test_texts_are_encoded_with_the_reward_models_tokenizer(folder: Path) -> None:
    scorer = RewardModelScorer.from_config(RewardModelConfig(path=str(folder), tokenizer=TokenizerMode.RETOKENIZE))
    assert scorer.encode_texts(["ab"], ["c"]) == [[2, 3, 4]]
    torch.testing.assert_close(scorer.score_texts(["ab"], ["c"]).scores, scorer.score_ids([[2, 3, 4]]).scores)


def test_long_sequences_keep_their_last_tokens_and_are_counted(folder: Path) -> None:
    scorer = RewardModelScorer.from_config(RewardModelConfig(path=str(folder), max_length=3))
    result = scorer.score_ids([[2, 3, 4, 5, 6], [4, 5, 6]])
    assert result.truncated == 1
    assert result.scores[0].item() == pytest.approx(result.scores[1].item(), abs=1e-6)


def test_a_token_outside_the_vocabulary_names_the_fix(folder: Path) -> None:
    scorer = RewardModelScorer.from_config(RewardModelConfig(path=str(folder)))
    with pytest.raises(RewardModelError, match=r"token id 99 outside .*vocab_size=16.*tokenizer=retokenize"):
        scorer.score_ids([[2, 99]])


def test_a_folder_without_a_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RewardModelError, match=r"reward_model.path=.*\(no config.json\).*rl-recipes rm"):
        RewardModelScorer.from_config(RewardModelConfig(path=str(tmp_path)))


def test_a_classifier_with_several_labels_is_refused(tmp_path: Path) -> None:
    model = _model()
    model.config.num_labels = 2
    with pytest.raises(RewardModelError, match="num_labels=2; a reward model has exactly one label"):
        RewardModelScorer(model, None, RewardModelConfig(path=str(tmp_path)))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"placement": "gpu"}, r"placement must be 'colocate' or 'slot'"),
        ({"slots": 0}, "slots must be an int >= 1"),
        ({"batch_size": 0}, "batch_size must be an int >= 1"),
        ({"weight": float("nan")}, "weight must be a finite number"),
        ({"max_length": 1}, "max_length must be null or an int >= 2"),
        ({"path": ""}, "path must be a non-empty str"),
    ],
)
def test_config_errors_name_the_field(change: dict[str, object], match: str) -> None:
    with pytest.raises(TrainConfigError, match=match) as error:
        dataclasses.replace(RewardModelConfig(path="rm"), **change)
    assert error.value.field == next(iter(change))


def test_same_tokens_need_the_same_vocabulary(folder: Path, tmp_path: Path) -> None:
    same, other = tmp_path / "same", tmp_path / "other"
    _tokenizer("abcdefghijklmn").save_pretrained(str(same))
    _tokenizer("nmlkjihgfedcba").save_pretrained(str(other))
    same_tokens = RewardModelConfig(path=str(folder))
    check_reward_model(same_tokens, ModelConfig(tokenizer_path=str(same), hf_config=_POLICY))
    with pytest.raises(RewardModelError, match=r"reward_model.tokenizer=same.*differs.*set reward_model.tokenizer="):
        check_reward_model(same_tokens, ModelConfig(tokenizer_path=str(other), hf_config=_POLICY))
    retokenize = RewardModelConfig(path=str(folder), tokenizer=TokenizerMode.RETOKENIZE)
    check_reward_model(retokenize, ModelConfig(tokenizer_path=str(other), hf_config=_POLICY))
