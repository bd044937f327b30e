"""Building the engine a server serves from `--model`: an HF checkpoint directory, or a config JSON for tests."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from rl_engines.rollout import HFEngine, HFEngineConfig, InvalidRequestError

logger = logging.getLogger(__name__)


def build_hf_engine(model: str, config: HFEngineConfig, *, seed: int = 0) -> HFEngine:
    """An `HFEngine` on `model`: a checkpoint directory, or a `config.json`-style file whose weights are drawn
    at random from `seed` (a tiny model for tests; `"model_type"` picks the architecture)."""
    path = Path(model)
    if path.is_dir():
        return HFEngine.from_config(dataclasses.replace(config, model_path=str(path)))
    if not path.is_file():
        raise InvalidRequestError(f"--model {model!r} is neither a checkpoint directory nor a config JSON file")
    try:
        spec = json.loads(path.read_text())
        model_type = spec.pop("model_type")
    except (ValueError, KeyError, AttributeError) as error:
        raise InvalidRequestError(f"{model} needs a JSON object with a 'model_type' (qwen2, ...): {error!r}") from None
    hf_config = AutoConfig.for_model(model_type, **spec)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        module = AutoModelForCausalLM.from_config(hf_config)
    logger.info("built a random %s model (%d parameters) from %s", model_type, module.num_parameters(), path)
    return HFEngine(module, config)
