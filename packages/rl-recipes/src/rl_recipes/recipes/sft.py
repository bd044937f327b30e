"""SFT: the supervised warm start (prompt + answer + eos, loss on the answer), exported as a Hugging Face folder.

    rl-recipes sft                         # the embedded default: tiny model, generated arithmetic data
    rl-recipes sft --config my_sft.yaml lr=1e-5

RL recipes run it first when their `warm_start` section is set and its model folder does not exist yet. `run` is
the whole run, as in the RL recipes: the data, the engine, then the training loop.
"""

from __future__ import annotations

from collections.abc import Callable

from rl_recipes.sft import SFTConfig, SFTResult, SFTStep, build_sft_engine, load_sft_data, train_sft

CONFIG_FILE = "sft.yaml"
"""The packaged default config of the warm start."""


def run(config: SFTConfig, *, on_step: Callable[[SFTStep], None] | None = None) -> SFTResult:
    """Train, export `<output_dir>/model` and score the held-out rows; `on_step` sees every step's record."""
    data = load_sft_data(config)  # the tokenizer and the training, validation and held-out rows, all checked
    engine = build_sft_engine(config, data)  # the training engine over the process group, scheduled for the run
    return train_sft(config, engine, data, on_step=on_step)  # steps with periodic validation, export, held-out score
