"""`run_rm`: encode the pairs as the policy's prompt + response ids, train by Bradley-Terry, score the held-out
pairs, write the Hugging Face folder a run's `reward_model.path` loads."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rl_engines.reward_model import RewardModelConfig, RewardModelScorer
from rl_recipes.embedded import build_embedded_tokenizer, embedded_model_config
from rl_recipes.rm._config import EMBEDDED_MODEL, RMConfig
from rl_recipes.rm._data import PreferenceDataError, PreferencePair, generate_math_pairs, load_pairs, write_pairs
from rl_recipes.rm._loss import bradley_terry_loss, pairwise_accuracy
from rl_recipes.tasks import build_prompt, encode_prompt, load_tokenizer, response_text

logger = logging.getLogger(__name__)

MODEL_DIR = "model"
SUMMARY_FILE = "summary.json"
METRICS_FILE = "metrics.jsonl"
DATA_DIR = "data"
_LOG_EVERY = 25


@dataclass(frozen=True)
class RMResult:
    """What `run_rm` did: steps, the held-out pairwise accuracy before and after, the folder it wrote."""

    steps: int
    train_pairs: int
    heldout_pairs: int
    heldout_accuracy_before: float
    heldout_accuracy: float
    final_loss: float
    seconds: float
    model_dir: Path


def encode_pair(pair: PreferencePair, tokenizer: Any) -> tuple[list[int], list[int]]:
    """(chosen, rejected) token ids as a run scores them with `reward_model.tokenizer: same`: the math task's
    prompt ids of the question, then the response's ids and eos."""
    prompt = encode_prompt(build_prompt(pair.prompt, tokenizer), tokenizer)

    def response(text: str) -> list[int]:
        encoded = tokenizer(response_text(text, tokenizer), add_special_tokens=False)
        ids = encoded["input_ids"]  # not-a-sample-field: tokenizer output key
        return [*prompt, *ids, tokenizer.eos_token_id]

    return response(pair.chosen), response(pair.rejected)


def _tokenizer(config: RMConfig) -> Any:
    if config.tokenizer is not None:
        return load_tokenizer(config.tokenizer)
    return build_embedded_tokenizer() if config.model == EMBEDDED_MODEL else load_tokenizer(config.model)


def _model(config: RMConfig, tokenizer: Any) -> Any:
    from transformers import AutoModelForSequenceClassification, LlamaForSequenceClassification

    if config.model == EMBEDDED_MODEL:
        hf_config = embedded_model_config(tokenizer)
        hf_config.num_labels = 1
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            return LlamaForSequenceClassification(hf_config)
    if not (Path(config.model) / "config.json").is_file():
        raise PreferenceDataError(f"RMConfig.model={config.model!r} is neither 'embedded' nor a model folder")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)  # the fresh head's initialisation
        model = AutoModelForSequenceClassification.from_pretrained(config.model, num_labels=1, local_files_only=True)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model


def _pairs(config: RMConfig, out: Path) -> tuple[list[PreferencePair], list[PreferencePair]]:
    if config.train_file is None:
        train, heldout = generate_math_pairs(config.pairs, config.heldout_pairs, config.seed)
        write_pairs(train, out / DATA_DIR / "train.jsonl")
        write_pairs(heldout, out / DATA_DIR / "heldout.jsonl")
        return train, heldout
    train = load_pairs(config.train_file)
    if config.heldout_file is not None:
        return train, load_pairs(config.heldout_file)
    if len(train) <= config.heldout_pairs:
        raise PreferenceDataError(
            f"RMConfig.train_file={config.train_file!r} has {len(train)} pairs, but heldout_pairs="
            f"{config.heldout_pairs} are kept out of training; lower heldout_pairs or give a heldout_file"
        )
    return train[: -config.heldout_pairs], train[-config.heldout_pairs :]


def _score_pairs(scorer: RewardModelScorer, encoded: Sequence[tuple[list[int], list[int]]]) -> tuple[float, float]:
    """(pairwise accuracy, mean margin) of the encoded pairs under `scorer`."""
    scorer.model.eval()
    chosen = scorer.score_ids([pair[0] for pair in encoded]).scores
    rejected = scorer.score_ids([pair[1] for pair in encoded]).scores
    return pairwise_accuracy(chosen, rejected), (chosen - rejected).mean().item()


def run_rm(config: RMConfig) -> RMResult:
    """Train the reward model of `config` and write `<output_dir>/model`, `summary.json` and `metrics.jsonl`."""
    threads = torch.get_num_threads()
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    try:
        return _run(config)
    finally:
        torch.set_num_threads(threads)


def _run(config: RMConfig) -> RMResult:
    start = time.perf_counter()
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(config)
    train, heldout = _pairs(config, out)
    train_ids = [encode_pair(pair, tokenizer) for pair in train]
    heldout_ids = [encode_pair(pair, tokenizer) for pair in heldout]
    model_dir = out / MODEL_DIR
    scorer = RewardModelScorer(
        _model(config, tokenizer), tokenizer, RewardModelConfig(path=str(model_dir), max_length=config.max_length)
    )
    accuracy_before, _ = _score_pairs(scorer, heldout_ids)
    optimizer = torch.optim.AdamW(scorer.model.parameters(), lr=config.lr)
    generator = torch.Generator().manual_seed(config.seed)
    order: list[int] = []
    loss_value = float("nan")
    with (out / METRICS_FILE).open("w", encoding="utf-8") as metrics_file:
        for step in range(1, config.steps + 1):
            if len(order) < config.batch_size:
                order += torch.randperm(len(train_ids), generator=generator).tolist()
            batch, order = order[: config.batch_size], order[config.batch_size :]
            scorer.model.train()
            sequences = [train_ids[i][0][-config.max_length :] for i in batch]
            sequences += [train_ids[i][1][-config.max_length :] for i in batch]
            scores = scorer.forward(sequences)
            chosen, rejected = scores[: len(batch)], scores[len(batch) :]
            loss = bradley_terry_loss(chosen, rejected)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss_value = loss.item()
            record = {"step": step, "rm/loss": loss_value, "rm/train_accuracy": pairwise_accuracy(chosen, rejected)}
            metrics_file.write(json.dumps(record) + "\n")
            if step % _LOG_EVERY == 0 or step == config.steps:
                logger.info("rm step %d/%d: loss %.4f", step, config.steps, loss_value)
    accuracy, margin = _score_pairs(scorer, heldout_ids)
    scorer.model.save_pretrained(str(model_dir))
    tokenizer.save_pretrained(str(model_dir))
    seconds = time.perf_counter() - start
    result = RMResult(config.steps, len(train), len(heldout), accuracy_before, accuracy, loss_value, seconds, model_dir)
    summary = {
        "steps": result.steps,
        "train_pairs": result.train_pairs,
        "heldout_pairs": result.heldout_pairs,
        "heldout_accuracy_before": accuracy_before,
        "heldout_accuracy": accuracy,
        "heldout_mean_margin": margin,
        "final_loss": loss_value,
        "seconds": round(seconds, 2),
        "model_dir": str(model_dir),
    }
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return result
