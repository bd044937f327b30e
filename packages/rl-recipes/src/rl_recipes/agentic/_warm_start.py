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
from rl_recipes.embedded import build_embedded_model
from rl_recipes.workflows import appended_text, encode, render
from rl_runtime.config._validators import int_at_least, number_in, of_type

logger = logging.getLogger(__name__)

MODEL_DIR = "model"


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
    """AdamW steps; 0 keeps the random initialisation."""
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


def _batch(rows: Sequence[tuple[list[int], list[int]]], pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), pad, dtype=torch.int64)
    attention = torch.zeros((len(rows), width), dtype=torch.int64)
    mask = torch.zeros((len(rows), width), dtype=torch.float32)
    for row, (ids, loss_mask) in enumerate(rows):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention[row, : len(ids)] = 1
        mask[row, : len(ids)] = torch.tensor(loss_mask, dtype=torch.float32)
    return input_ids, attention, mask


def masked_loss(model: Any, input_ids: torch.Tensor, attention: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over the tokens whose `mask` is 1 (all `(B, T)`; token t is predicted from the
    ones before it, so the first token never counts)."""
    logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1]
    targets, weights = input_ids[:, 1:], mask[:, 1:]
    per_token = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    return (per_token * weights).sum() / weights.sum().clamp(min=1)


def fine_tune(model: Any, examples: Sequence[tuple[list[int], list[int]]], settings: AgenticWarmStartConfig, pad: int):
    """`settings.steps` AdamW steps of `masked_loss` on random batches of `examples`; the loss per step."""
    rng = random.Random(settings.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=0.0)
    model.train()
    losses: list[float] = []
    for _ in range(settings.steps):
        batch = _batch([examples[rng.randrange(len(examples))] for _ in range(settings.batch_size)], pad)
        loss = masked_loss(model, *batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def warm_start(
    settings: AgenticWarmStartConfig, tokenizer: Any, train_rows: Sequence[Mapping[str, Any]], target: Path
) -> Path:
    """Write the warm-started model folder `target` (weights, config, tokenizer, generation config): the embedded
    model sized to `tokenizer`, fine-tuned on demonstrations of the first `settings.num_demos` of `train_rows`."""
    rng = random.Random(settings.seed)
    examples = [
        masked_conversation(tokenizer, demonstration(dict(row), direct=rng.random() < settings.direct_fraction))
        for row in train_rows[: settings.num_demos]
    ]
    model = build_embedded_model(settings.seed, tokenizer)
    with torch.random.fork_rng(devices=[]), torch_threads(1):
        torch.manual_seed(settings.seed)
        losses = fine_tune(model, examples, settings, tokenizer.pad_token_id)
    logger.info(
        "agentic warm start: %d demos, %d steps, loss %.3f -> %.3f",
        len(examples),
        settings.steps,
        losses[0] if losses else float("nan"),
        losses[-1] if losses else float("nan"),
    )
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    model.generation_config.save_pretrained(str(target))
    return target
