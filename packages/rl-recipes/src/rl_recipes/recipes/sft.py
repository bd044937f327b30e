"""SFT: the supervised warm start (prompt + answer + eos, loss on the answer), exported as a Hugging Face folder.

    rl-recipes sft                         # the embedded default: tiny model, generated arithmetic data
    rl-recipes sft --config my_sft.yaml lr=1e-5

RL recipes run it first when their `warm_start` section is set and its model folder does not exist yet.
"""

from __future__ import annotations

from rl_recipes.sft import SFTConfig, SFTResult, run_sft

CONFIG_FILE = "sft.yaml"
"""The packaged default config of the warm start."""


def run(config: SFTConfig) -> SFTResult:
    """Train, export `<output_dir>/model` and score the held-out rows."""
    return run_sft(config)
