"""The SRPO recipe's warm start: a tiny VLA sized for the env, its word tokenizer over the env's instructions, and
behaviour cloning on expert (bot) demonstrations, as the paper starts RL from an SFT'd VLA."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Sequence
from pathlib import Path

import torch

from rl_core.envs import EnvConfig, EnvSpec, make_env
from rl_engines.vla import TinyVLAConfig, TinyVLAForActionChunking, WordTokenizer
from rl_recipes._errors import RecipeError
from rl_recipes.embodied._config import VLAWarmStartConfig
from rl_recipes.environments import Demonstration, babyai_demos

logger = logging.getLogger(__name__)

DEMO_ENVS = ("babyai",)
"""Envs with an expert that plays demonstrations."""


def probe_env(config: EnvConfig) -> tuple[EnvSpec, list[str]]:
    """The env's spec, and the instruction of every (task, trial) (one in-process env, reset once per pair)."""
    env = make_env(dataclasses.replace(config, num_envs=1, num_workers=0))
    try:
        spec = env.spec

        async def instructions() -> list[str]:
            texts = []
            for task in range(len(spec.task_names)):
                for trial in range(spec.num_trials):
                    texts += (await env.reset([task], [trial])).instructions
            return texts

        return spec, asyncio.run(instructions())
    finally:
        env.close()


def vla_config(spec: EnvSpec, tokenizer: WordTokenizer, settings: VLAWarmStartConfig) -> TinyVLAConfig:
    """A tiny VLA for `spec`'s frames and action space, with `settings`' trunk and chunk size."""
    return TinyVLAConfig(
        image_shape=spec.image_shape,
        chunk_size=settings.chunk_size,
        action_dims=spec.action_dims,
        action_bins=spec.action_bins,
        vocab_size=len(tokenizer),
        max_instruction_len=settings.max_instruction_len,
        hidden_size=settings.hidden_size,
        num_hidden_layers=settings.num_hidden_layers,
        num_attention_heads=settings.num_attention_heads,
        intermediate_size=2 * settings.hidden_size,
    )


def chunk_examples(
    demos: Sequence[Demonstration], chunk: int, tokenizer: WordTokenizer, max_length: int
) -> tuple[torch.Tensor, ...]:
    """Every policy step of the demos: instruction ids and mask (N, L), frame (N, C, H, W), target bins (N, K*D)
    and their mask (N, K*D) (the chunk's steps after the episode's end are masked)."""
    texts, frames, targets, masks = [], [], [], []
    for demo in demos:
        steps, dims = demo.actions.shape
        for start in range(0, steps, chunk):
            target = torch.zeros((chunk, dims), dtype=torch.int64)
            taken = demo.actions[start : start + chunk]
            target[: taken.shape[0]] = taken
            mask = torch.zeros((chunk, dims), dtype=torch.bool)
            mask[: taken.shape[0]] = True
            texts.append(demo.instruction)
            frames.append(demo.frames[start])
            targets.append(target.flatten())
            masks.append(mask.flatten())
    ids, attention = tokenizer.encode(texts, max_length=max_length)
    return ids, attention, torch.stack(frames), torch.stack(targets), torch.stack(masks)


def behaviour_clone(
    model: TinyVLAForActionChunking, examples: tuple[torch.Tensor, ...], settings: VLAWarmStartConfig
) -> list[float]:
    """`settings.steps` Adam steps of masked cross-entropy on the demos' action chunks; the loss per step."""
    ids, attention, frames, targets, masks = examples
    rng = random.Random(settings.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
    model.train()
    losses = []
    for _ in range(settings.steps):
        rows = torch.tensor([rng.randrange(ids.shape[0]) for _ in range(settings.batch_size)])
        logits = model(ids[rows], attention[rows], frames[rows])  # (B, K*D, bins)
        per_token = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets[rows], reduction="none")
        loss = (per_token * masks[rows]).sum() / masks[rows].sum().clamp(min=1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def warm_start(env: EnvConfig, settings: VLAWarmStartConfig, train_trials: int, target: Path) -> Path:
    """Write the warm-started VLA (and its word tokenizer) into `target`: sized for `env`, behaviour-cloned on
    `settings.num_demos` bot episodes over the training pool's (task, trial) pairs."""
    if env.name not in DEMO_ENVS:
        raise RecipeError(
            f"warm_start: env {env.name!r} has no expert demonstrations (only {', '.join(DEMO_ENVS)} does); set "
            "warm_start=null and point actor.model.path at an SFT'd VLA folder"
        )
    spec, instructions = probe_env(env)
    tokenizer = WordTokenizer.from_texts(instructions)
    config = vla_config(spec, tokenizer, settings)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings.seed)
        model = TinyVLAForActionChunking(config)
        tasks = len(spec.task_names)
        pairs = [(i % tasks, (i // tasks) % train_trials) for i in range(settings.num_demos)]
        demos = babyai_demos(env, [task for task, _ in pairs], [trial for _, trial in pairs])
        if not demos:
            raise RecipeError(f"warm_start: the bot solved none of {len(pairs)} episodes; check env.max_steps")
        examples = chunk_examples(demos, settings.chunk_size, tokenizer, settings.max_instruction_len)
        losses = behaviour_clone(model, examples, settings)
    logger.info(
        "warm start: %d demos, %d chunks, loss %.3f -> %.3f",
        len(demos),
        examples[0].shape[0],
        losses[0] if losses else float("nan"),
        losses[-1] if losses else float("nan"),
    )
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(target)
    return target
