"""A hand-worked three-sample batch in the sample schema, shared by the metric tests.

Rows hold prompt+response (T = 6). Sample 0: prompt 2, response 2 tokens. Sample 1: prompt 3 (the limit),
response 3 (the limit: clipped). Sample 2: prompt 3, empty response (aborted). Numbers under a zero
`response_mask` are junk on purpose: no metric may read them.
"""

from __future__ import annotations

import pytest
import torch

MAX_PROMPT_LENGTH = 3
MAX_RESPONSE_LENGTH = 3
JUNK = 9.0


def hand_batch() -> dict[str, torch.Tensor]:
    """The batch the module docstring describes."""
    attention_mask = torch.tensor([[0, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 0, 0]])
    response_mask = torch.tensor([[0, 0, 0, 1, 1, 0], [0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0]])
    j = JUNK
    return {
        "attention_mask": attention_mask,
        "response_mask": response_mask,
        "prompt_len": torch.tensor([2, 3, 3]),
        "response_len": torch.tensor([2, 3, 0]),
        # Per-sample masked sums: 1.0, 1.5 and (aborted) 0.
        "token_level_scores": torch.tensor([[j, 0, 0, 0, 1.0, j], [0, 0, 0, -0.5, 0, 2.0], [0, 5.0, 0, 0, 0, 0]]),
        # Scores minus a 0.1 KL penalty per response token: sums 0.8 and 1.2.
        "token_level_rewards": torch.tensor([[j, 0, 0, -0.1, 0.9, j], [0, 0, 0, -0.6, -0.1, 1.9], [j] * 6]),
        "advantages": torch.tensor([[j, j, j, 0.5, 0.5, j], [j, j, j, -0.5, -0.5, -0.5], [j] * 6]),
        "returns": torch.tensor([[j, j, j, 1.0, 2.0, j], [j, j, j, 0.0, 1.0, 2.0], [j] * 6]),
        "values": torch.tensor([[j, j, j, 1.0, 1.0, j], [j, j, j, 0.0, 1.0, 1.0], [j] * 6]),
    }


@pytest.fixture
def batch() -> dict[str, torch.Tensor]:
    """A fresh copy of the hand-worked batch."""
    return hand_batch()
