"""The agentic recipe's warm start: the embedded tiny model fine-tuned on a few tool-using demonstrations, the loss on
the model's own tokens only (the tool's result and the prompt are masked out)."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import torch

from rl_recipes.agentic._problems import demonstration
from rl_recipes.agentic._task import tool_schemas
from rl_recipes.sft import (
    EMBEDDED_MODEL,
    MODEL_DIR,
    SFTConfig,
    SFTData,
    SFTExample,
    build_sft_engine,
    export_model_folder,
    train_sft,
)
from rl_recipes.workflows import appended_text, encode, render
from rl_runtime.config._validators import int_at_least, number_in, of_type

logger = logging.getLogger(__name__)


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run the body with `count` intra-op threads, then restore the setting: the tiny model runs some 20x faster on
    one thread than on two a loaded machine contends for (measured at load 16 on 2 cores: 0.08 s vs 1.75 s a
    forward and backward of 16 x 64 tokens)."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@attrs.frozen
class AgenticWarmStartConfig:
    """Supervised fine-tuning of the embedded model on `num_demos` expert conversations (a deliberately short run:
    a weak start leaves room for RL)."""

    output_dir: str = attrs.field(default="runs/agentic/sft", validator=of_type(str))
    """Where the warm-started model folder (`<output_dir>/model`, tokenizer included) is written."""
    num_demos: int = attrs.field(default=256, validator=int_at_least(1))
    """Demonstrations: the first `num_demos` training questions, each solved with one calculator call."""
    steps: int = attrs.field(default=600, validator=int_at_least(0))
    """Optimizer steps of `rl-recipes sft`'s loop (AdamW); 0 keeps the random initialisation."""
    batch_size: int = attrs.field(default=16, validator=int_at_least(1))
    """Demonstrations per step."""
    lr: float = attrs.field(default=3e-3, validator=number_in(0, low_open=True))
    """Learning rate."""
    seed: int = attrs.field(default=0, validator=int_at_least(0))
    """Seed of the initial weights, the batch order and which demonstrations answer directly."""
    direct_fraction: float = attrs.field(default=0.0, validator=number_in(0, 1, high_open=True))
    """Share of the demonstrations that answer without the tool (the true sum, as if added in the head): the warm
    start then calls the tool on only part of the questions, and RL has to learn that calling it is what pays."""

    @property
    def model_dir(self) -> Path:
        """The warm-started model folder."""
        return Path(self.output_dir) / MODEL_DIR


def masked_conversation(tokenizer: Any, messages: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[int]]:
    """(token ids, loss mask) of a whole conversation as the `tool_calling` workflow builds it: the rendered first
    prompt (mask 0), each assistant turn's tokens plus eos (mask 1), and the text each tool message adds with the
    next generation prompt (mask 0)."""
    tools = list(tool_schemas())
    ids = encode(tokenizer, render(tokenizer, messages[:1], tools=tools))
    mask = [0] * len(ids)
    for index in range(1, len(messages)):
        message = messages[index]
        if message["role"] == "assistant":
            turn = [*encode(tokenizer, str(message["content"])), tokenizer.eos_token_id]
            ids += turn
            mask += [1] * len(turn)
        elif messages[index - 1]["role"] == "assistant":
            before = render(tokenizer, messages[:index], tools=tools, add_generation_prompt=False)
            following = index
            while following + 1 < len(messages) and messages[following + 1]["role"] != "assistant":
                following += 1
            after = render(tokenizer, messages[: following + 1], tools=tools)
            observation = encode(tokenizer, appended_text(before, after, "agentic warm start"))
            ids += observation
            mask += [0] * len(observation)
    return ids, mask


def demonstration_examples(
    tokenizer: Any, rows: Sequence[Mapping[str, Any]], settings: AgenticWarmStartConfig
) -> list[SFTExample]:
    """The SFT rows of the warm start: each row's demonstration (a share `settings.direct_fraction` answering
    without the tool, drawn with `settings.seed`) as its first prompt, then the rest of the conversation as the
    response with the loss on the model's tokens only (`masked_conversation`)."""
    rng = random.Random(settings.seed)
    examples = []
    for row in rows:
        ids, mask = masked_conversation(
            tokenizer, demonstration(dict(row), direct=rng.random() < settings.direct_fraction)
        )
        prompt = mask.index(1)
        examples.append(SFTExample(tuple(ids[:prompt]), tuple(ids[prompt:]), tuple(mask[prompt:])))
    return examples


def sft_config(settings: AgenticWarmStartConfig) -> SFTConfig:
    """The `rl-recipes sft` settings of the warm start: the embedded model, `settings.steps` steps at a constant
    `settings.lr` from the first step, no validation or early stop (the demonstrations are all it sees)."""
    return SFTConfig(
        model=EMBEDDED_MODEL,
        steps=max(1, settings.steps),
        batch_size=settings.batch_size,
        lr=settings.lr,
        lr_schedule="constant",
        warmup_steps=0,
        seed=settings.seed,
        eval_every=0,
        validation_size=0,
        stop_at_exact_match=None,
        output_dir=settings.output_dir,
    )


def warm_start(
    settings: AgenticWarmStartConfig, tokenizer: Any, train_rows: Sequence[Mapping[str, Any]], target: Path
) -> Path:
    """Write the warm-started model folder `target` (weights, config, tokenizer, generation config): the embedded
    model sized to `tokenizer`, trained by `rl-recipes sft`'s engine and loop (`train_sft`, `response_nll_loss`)
    on demonstrations of the first `settings.num_demos` of `train_rows`; `settings.steps` 0 keeps the initial
    weights. The step losses go to `<settings.output_dir>/metrics.jsonl`."""
    config = sft_config(settings)
    data = SFTData(tokenizer, demonstration_examples(tokenizer, train_rows[: settings.num_demos], settings), [], [])
    with torch_threads(1):
        engine = build_sft_engine(config, data)
        if settings.steps == 0:
            return export_model_folder(engine, tokenizer, target)
        result = train_sft(config, engine, data)
        if target != result.model_dir:
            export_model_folder(engine, tokenizer, target)
    logger.info(
        "agentic warm start: %d demos, %d steps, loss %.3f -> %.3f, %.1f s",
        len(data.examples),
        result.steps,
        result.losses[0],
        result.losses[-1],
        result.train_seconds,
    )
    return target
