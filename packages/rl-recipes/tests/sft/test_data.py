"""SFT rows: prompt then response + eos as generation sees them, cutting and dropping, padded batches, row order."""

from __future__ import annotations

import logging

import pytest
import torch

from rl_recipes.embedded import build_embedded_tokenizer
from rl_recipes.sft import (
    RowOrder,
    SFTError,
    SFTExample,
    collate,
    encode_example,
    encode_examples,
    split_validation,
)
from rl_recipes.tasks import MathSample

TOKENIZER = build_embedded_tokenizer()
SAMPLE = MathSample("What is 2 + 3?", "2 + 3 = 5 #### 5", "5", 0)
PROMPT_LENGTH = 14  # Question : ␣ What ␣is␣ 2 ␣ + ␣ 3 ? \n Answer :
RESPONSE_LENGTH = 13  # ␣ 2 ␣ + ␣ 3 ␣=␣ 5 ␣ #### ␣ 5 <eos>


def test_row_is_prompt_then_space_answer_eos() -> None:
    example = encode_example(SAMPLE, TOKENIZER, max_length=64)
    assert example is not None
    assert TOKENIZER.decode(example.prompt_ids) == "Question: What is 2 + 3?\nAnswer:"
    assert TOKENIZER.decode(example.response_ids) == " 2 + 3 = 5 #### 5<eos>"
    assert (len(example.prompt_ids), len(example.response_ids)) == (PROMPT_LENGTH, RESPONSE_LENGTH)
    assert example.response_ids[-1] == TOKENIZER.eos_token_id
    assert example.length == PROMPT_LENGTH + RESPONSE_LENGTH


def test_long_rows_are_cut_and_prompt_filled_rows_dropped(caplog: pytest.LogCaptureFixture) -> None:
    cut = encode_example(SAMPLE, TOKENIZER, max_length=PROMPT_LENGTH + 3)
    assert cut is not None and TOKENIZER.decode(cut.response_ids) == " 2 "
    assert encode_example(SAMPLE, TOKENIZER, max_length=PROMPT_LENGTH) is None
    long_question = MathSample("What is 1234567 + 1?", "1234567 + 1 = 1234568 #### 1234568", "1234568", 1)
    with caplog.at_level(logging.WARNING):
        examples = encode_examples([SAMPLE, long_question], TOKENIZER, max_length=PROMPT_LENGTH + 3)
    assert len(examples) == 1
    assert "dropped 1 rows whose prompt fills it, cut the response of 1 rows" in caplog.text


def test_rejects_when_every_prompt_fills_max_length() -> None:
    with pytest.raises(
        SFTError, match=r"every one of the 1 training rows .*SFTConfig.max_length=5 tokens; raise max_length"
    ):
        encode_examples([SAMPLE], TOKENIZER, max_length=5)


def test_collate_pads_right_and_masks_the_response() -> None:
    rows = [SFTExample((5, 6), (7, 2)), SFTExample((5,), (8, 9, 2))]
    batch = collate(rows, pad_token_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 2], [5, 8, 9, 2]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 1, 1]]
    assert batch["response_mask"].tolist() == [[0, 0, 1, 1], [0, 1, 1, 1]]
    short = collate([SFTExample((5,), (2,)), rows[0]], pad_token_id=0)
    assert short["input_ids"].tolist() == [[5, 2, 0, 0], [5, 6, 7, 2]]
    assert short["attention_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert short["response_mask"].tolist() == [[0, 1, 0, 0], [0, 0, 1, 1]]
    assert all(t.dtype == torch.int64 for t in short.values())


def test_a_loss_mask_keeps_response_tokens_out_of_the_response_mask() -> None:
    multi_turn = SFTExample((5,), (7, 2, 30, 31, 8, 2), loss_mask=(1, 1, 0, 0, 1, 1))  # a tool's tokens in between
    batch = collate([multi_turn, SFTExample((5, 6), (9, 2))], pad_token_id=0)
    assert batch["response_mask"].tolist() == [[0, 1, 1, 0, 0, 1, 1], [0, 0, 1, 1, 0, 0, 0]]
    with pytest.raises(SFTError, match="loss_mask has 2 entries for 3 response tokens"):
        SFTExample((5,), (7, 8, 2), loss_mask=(1, 1))


def test_row_order_is_seeded_and_covers_each_epoch() -> None:
    order = RowOrder(5, seed=3)
    first, second = order.take(3), order.take(3)
    epoch = first + second[:2]
    assert sorted(epoch) == [0, 1, 2, 3, 4]
    assert RowOrder(5, seed=3).take(6) == first + second
    assert RowOrder(5, seed=4).take(6) != first + second
    with pytest.raises(ValueError, match="num_rows must be >= 1"):
        RowOrder(0, seed=0)


def _rows(count: int) -> list[MathSample]:
    return [MathSample(f"What is {i} + 1?", f"{i} + 1 = {i + 1} #### {i + 1}", str(i + 1), i) for i in range(count)]


def test_split_validation_is_seeded_disjoint_and_ordered() -> None:
    train, validation = split_validation(_rows(10), 3, seed=0)
    assert len(train) == 7 and len(validation) == 3
    assert sorted(s.index for s in train + validation) == list(range(10))
    assert [s.index for s in validation] == sorted(s.index for s in validation)  # file order kept
    assert split_validation(_rows(10), 3, seed=0) == (train, validation)
    assert split_validation(_rows(10), 3, seed=5)[1] != validation
    assert split_validation(_rows(4), 0, seed=0) == (_rows(4), [])


def test_split_validation_rejects_taking_every_row() -> None:
    with pytest.raises(SFTError, match=r"validation_size=4 leaves no training rows out of 4; use fewer than 4"):
        split_validation(_rows(4), 4, seed=0)
