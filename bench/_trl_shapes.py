"""The shapes `grpo_vs_trl.py --shape` measures: a model family and size, and a response length set by the data.

`default` is the embedded default as `rl-recipes sft` builds it (a ~130K-parameter Llama, answers like
` 23 + 18 = 41 #### 41`, ~17 tokens with the eos). Every other shape writes its own arithmetic rows (the embedded
default's problems, operands 0-49, `+` and `-`, in an answer format of its own), saves a freshly initialised model
of its family with the embedded character tokenizer, and warm-starts it with `rl-recipes sft` on those rows as the
default is, so that both sides generate what a supervised warm start taught the model, at realistic lengths.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from _trl_setup import CONFIG_FILE, DATA_DIR, MODEL_DIR, TRAIN_FILE, cli_command, ensure_sft

logger = logging.getLogger(__name__)

DEFAULT_SHAPE = "default"
ALL_SHAPES = "all"
HELDOUT_FILE = "heldout.jsonl"
INIT_DIR = "init"
"""The freshly initialised model folder the SFT starts from."""
SFT_STEPS = 1500
"""The embedded default's cap; a shape stops earlier once its validation exact match reaches the default's 0.2."""

Problem = tuple[int, str, int]


def _result(problem: Problem) -> int:
    a, op, b = problem
    return a + b if op == "+" else a - b


def _answer_only(problem: Problem) -> str:
    """`#### 41`: the final answer alone (6 response tokens with the leading space and the eos)."""
    return f"#### {_result(problem)}"


def _checked(problem: Problem) -> str:
    """`23 + 18 = 41 , 41 - 18 = 23 #### 41`: the sum, then the inverse operation as a check (~30 tokens)."""
    a, op, b = problem
    result = _result(problem)
    check = f"{result} - {b} = {a}" if op == "+" else f"{result} + {b} = {a}"
    return f"{a} {op} {b} = {result} , {check} #### {result}"


@dataclass(frozen=True)
class Shape:
    """One benchmark shape: the model (`model_type` and sizes, None for the embedded default), the answer format
    the SFT teaches, and the completion budget both sides generate with."""

    name: str
    description: str
    max_new_tokens: int
    model_type: str | None = None
    sizes: dict[str, int] = field(default_factory=dict)
    answer: Callable[[Problem], str] | None = None
    sft_max_length: int = 64
    sft_steps: int = SFT_STEPS
    """The SFT's step cap (it stops earlier at the default's exact match of 0.2)."""

    def sft_dir(self, work_dir: Path) -> Path:
        """Where this shape's SFT run (model and data) lives."""
        return work_dir / ("sft" if self.name == DEFAULT_SHAPE else f"sft-{self.name}")


SHAPES = {
    shape.name: shape
    for shape in (
        Shape(
            DEFAULT_SHAPE,
            "embedded Llama, ~130K parameters (hidden 64, 2 layers), answers ` 23 + 18 = 41 #### 41` (~17 tokens)",
            max_new_tokens=24,
        ),
        Shape(
            "qwen3-short",
            "Qwen3, ~0.34M parameters (hidden 96, 3 layers), answers ` #### 41` (6 tokens)",
            max_new_tokens=12,
            model_type="qwen3",
            sizes={"hidden_size": 96, "intermediate_size": 288, "num_hidden_layers": 3, "num_attention_heads": 4},
            answer=_answer_only,
        ),
        Shape(
            "mistral-long",
            "Mistral, ~0.8M parameters (hidden 128, 4 layers), answers ` 23 + 18 = 41 , 41 - 18 = 23 #### 41` "
            "(~30 tokens)",
            max_new_tokens=48,
            model_type="mistral",
            sizes={"hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 4, "num_attention_heads": 4},
            answer=_checked,
            sft_max_length=96,
            sft_steps=600,  # ~1 s a step on 2 loaded cores; the answer format is learnt within a few hundred
        ),
    )
}


def shape_names(choice: str) -> list[str]:
    """The shapes `--shape choice` runs: one by name, or every shape for `all`."""
    return list(SHAPES) if choice == ALL_SHAPES else [choice]


def _write_rows(shape: Shape, data_dir: Path) -> None:
    """The embedded default's train and held-out problems in `shape`'s answer format."""
    from rl_recipes.embedded import (
        DEFAULT_DATASET_SEED,
        DEFAULT_HELDOUT_SIZE,
        DEFAULT_SPEC,
        DEFAULT_TRAIN_SIZE,
        generate_arithmetic_splits,
    )

    data_dir.mkdir(parents=True, exist_ok=True)
    splits = generate_arithmetic_splits(DEFAULT_TRAIN_SIZE, DEFAULT_HELDOUT_SIZE, DEFAULT_DATASET_SEED, DEFAULT_SPEC)
    assert shape.answer is not None
    for name, rows in zip((TRAIN_FILE, HELDOUT_FILE), splits, strict=True):
        lines = []
        for row in rows:  # the question reads back as format_row wrote it: "What is 23 + 18?"
            a, op, b = row["question"].removeprefix("What is ").removesuffix("?").split()
            lines.append(json.dumps({"question": row["question"], "answer": shape.answer((int(a), op, int(b)))}))
        (data_dir / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _save_init_model(shape: Shape, folder: Path, seed: int) -> None:
    """A freshly initialised `shape.model_type` model with the embedded tokenizer, saved as an HF folder."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from rl_recipes.embedded import build_embedded_tokenizer, save_embedded_tokenizer

    tokenizer = build_embedded_tokenizer()
    heads = shape.sizes["num_attention_heads"]
    config = AutoConfig.for_model(
        shape.model_type,
        vocab_size=len(tokenizer),
        num_key_value_heads=heads // 2,
        head_dim=shape.sizes["hidden_size"] // heads,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        sliding_window=None,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **shape.sizes,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(str(folder))
    save_embedded_tokenizer(tokenizer, folder)
    logger.info("%s: initial %s model, %d parameters", shape.name, shape.model_type, model.num_parameters())


def ensure_shape_sft(shape: Shape, work_dir: Path, seed: int = 0) -> Path:
    """`shape`'s model after its SFT warm start (made unless already there); returns the model folder. The data
    rows are in the model folder's sibling `data/`."""
    sft_dir = shape.sft_dir(work_dir)
    if shape.model_type is None:
        return ensure_sft(sft_dir)
    model = sft_dir / MODEL_DIR
    data = sft_dir / DATA_DIR
    if (model / CONFIG_FILE).is_file() and (data / TRAIN_FILE).is_file():
        logger.info("SFT model (%s): reusing %s", shape.name, model)
        return model
    _write_rows(shape, data)
    init = sft_dir / INIT_DIR
    _save_init_model(shape, init, seed)
    overrides = [
        f"model={init}",
        f"train_file={data / TRAIN_FILE}",
        f"heldout_file={data / HELDOUT_FILE}",
        f"max_length={shape.sft_max_length}",
        f"eval_max_new_tokens={shape.max_new_tokens}",
        f"steps={shape.sft_steps}",
        f"seed={seed}",
        f"output_dir={sft_dir}",
    ]
    logger.info("SFT model (%s): running `rl-recipes sft %s` (a few minutes)", shape.name, " ".join(overrides))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    subprocess.run([*cli_command(), "sft", *overrides], check=True, env=env)
    return model
