"""`WordTokenizer`: a word-level tokenizer over a closed instruction vocabulary (BabyAI's missions), saved beside
the model as `word_tokenizer.json`.

Words are the lower-cased runs of letters and digits. Id 0 is `<pad>`, id 1 is `<unk>`: a word outside the
vocabulary maps to `<unk>` (the env's vocabulary is closed, so one usually means a different env or task set;
`encode(..., strict=True)` raises instead).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from rl_engines.vla._errors import VLAError

TOKENIZER_FILE = "word_tokenizer.json"
"""The file a `WordTokenizer` is saved to in a model folder."""

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1
_WORD = re.compile(r"[a-z0-9]+")


def split_words(text: str) -> list[str]:
    """The lower-cased words (runs of letters and digits) of `text`."""
    return _WORD.findall(text.lower())


class WordTokenizer:
    """Instruction text <-> word ids over a fixed vocabulary (`<pad>` = 0, `<unk>` = 1, then the words)."""

    def __init__(self, words: Sequence[str]) -> None:
        if list(words[:2]) != [PAD, UNK]:
            raise VLAError(f"a WordTokenizer vocabulary starts with {[PAD, UNK]}, got {list(words[:2])}")
        if len(set(words)) != len(words):
            raise VLAError("a WordTokenizer vocabulary must not repeat words")
        self.words = tuple(words)
        self.ids = {word: index for index, word in enumerate(self.words)}

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> WordTokenizer:
        """The vocabulary of every word in `texts`, sorted (so the same texts give the same ids)."""
        vocabulary = sorted({word for text in texts for word in split_words(text)})
        return cls([PAD, UNK, *vocabulary])

    def __len__(self) -> int:
        return len(self.words)

    def encode(
        self, texts: Sequence[str], *, max_length: int | None = None, strict: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`N` texts -> (input_ids (N, L), attention_mask (N, L)) int64, right-padded to the longest (>= 1 token).

        Raises:
            VLAError: a text is longer than `max_length`, or (with `strict`) has a word outside the vocabulary.
        """
        encoded: list[list[int]] = []
        for text in texts:
            words = split_words(text)
            if strict:
                unknown = [word for word in words if word not in self.ids]
                if unknown:
                    raise VLAError(
                        f"instruction {text!r} has words outside the tokenizer's vocabulary: {unknown}; rebuild the "
                        "WordTokenizer from this env's instructions"
                    )
            encoded.append([self.ids.get(word, UNK_ID) for word in words] or [UNK_ID])
        length = max((len(ids) for ids in encoded), default=1)
        if max_length is not None and length > max_length:
            raise VLAError(
                f"an instruction has {length} words, more than max_length={max_length} "
                "(TinyVLAConfig.max_instruction_len); raise it or shorten the instruction"
            )
        input_ids = torch.full((len(encoded), length), PAD_ID, dtype=torch.int64)
        attention_mask = torch.zeros((len(encoded), length), dtype=torch.int64)
        for row, ids in enumerate(encoded):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention_mask[row, : len(ids)] = 1
        return input_ids, attention_mask

    def decode(self, input_ids: torch.Tensor) -> list[str]:
        """(N, L) ids -> N texts (padding dropped)."""
        return [" ".join(self.words[i] for i in row if i != PAD_ID) for row in input_ids.tolist()]

    def save_pretrained(self, folder: str | Path) -> Path:
        """Write `word_tokenizer.json` into `folder` (created if missing); return its path."""
        path = Path(folder) / TOKENIZER_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"words": list(self.words)}, indent=1))
        return path

    @classmethod
    def from_pretrained(cls, folder: str | Path) -> WordTokenizer:
        """Read the `word_tokenizer.json` that `save_pretrained` wrote into `folder`."""
        path = Path(folder) / TOKENIZER_FILE
        if not path.is_file():
            raise VLAError(f"{str(folder)!r} has no {TOKENIZER_FILE}; save the WordTokenizer beside the model")
        return cls(json.loads(path.read_text())["words"])
