"""The TRL side of `grpo_vs_trl.py`: TRL's GRPOTrainer on the shared model and prompts, paused between windows.

Runs in the TRL venv (transformers, trl, datasets; no rl-* packages installed). The reward is rl_recipes'
`gsm8k_exact_match` itself, imported from the repository's sources (`rl_recipes.rewards` needs only rl_core and
torch). A TrainerCallback blocks at the start of training and after every K-th optimizer step until the driver
sends the next command (see `_trl_protocol`); the reward function counts the completions and the completion
tokens TRL actually generated (through the first eos, as TRL masks them).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _trl_protocol import RUN, claim_stdout, receive_command, send

REPO = Path(__file__).resolve().parent.parent
SOURCES = (REPO / "packages/rl-core/src", REPO / "packages/rl-recipes/src")
STEPS_MARGIN = 1
"""TRL's max_steps is the steps the driver asks for plus this; the driver stops training explicitly."""


class GenerationCount:
    """Completions and completion tokens generated so far, and the rewards given."""

    def __init__(self) -> None:
        self.completions = 0
        self.tokens = 0
        self.reward_sum = 0.0


def make_reward(count: GenerationCount) -> Any:
    """TRL reward function: rl_recipes' GSM8K exact match against the row's ground truth; counts what was generated."""
    from rl_recipes.rewards import gsm8k_exact_match

    def gsm8k_exact_match_reward(
        completions: list[str], ground_truth: list[str], completion_ids: list[list[int]], **_: Any
    ) -> list[float]:
        rewards = [gsm8k_exact_match(text, truth) for text, truth in zip(completions, ground_truth, strict=True)]
        count.completions += len(completion_ids)
        count.tokens += sum(len(ids) for ids in completion_ids)
        count.reward_sum += sum(rewards)
        return rewards

    return gsm8k_exact_match_reward


def make_gate(protocol: Any, count: GenerationCount, setup: dict[str, Any]) -> Any:
    """A TrainerCallback that runs the driver's windows: it blocks until told how many steps to run next. `setup`
    goes into the ready message."""
    from transformers import TrainerCallback

    class WindowGate(TrainerCallback):
        def __init__(self) -> None:
            self.remaining = 0
            self.start = 0.0
            self.step_starts: list[float] = []
            self.marks = (0, 0, 0.0)

        def _wait(self, control: Any) -> Any:
            command = receive_command()
            if command["cmd"] != RUN:
                control.should_training_stop = True
                return control
            self.remaining = int(command["steps"])
            self.marks = _marks(count)
            self.start = time.perf_counter()
            self.step_starts = [self.start]
            return control

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            versions = {"trl": _version("trl"), "torch": _version("torch")}
            send(protocol, {"ready": {**setup, "threads": _threads(), **versions}})
            return self._wait(control)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            now = time.perf_counter()
            self.step_starts.append(now)
            self.remaining -= 1
            if self.remaining > 0:
                return control
            completions, tokens, rewards = (total - mark for total, mark in zip(_marks(count), self.marks, strict=True))
            steps = len(self.step_starts) - 1
            send(
                protocol,
                {
                    "seconds": now - self.start,
                    "steps": steps,
                    "completions": completions,
                    "tokens": tokens,
                    "reward_mean": rewards / max(completions, 1),
                    "step_seconds": [b - a for a, b in zip(self.step_starts, self.step_starts[1:], strict=False)],
                },
            )
            return self._wait(control)

    return WindowGate()


def _marks(count: GenerationCount) -> tuple[int, int, float]:
    return count.completions, count.tokens, count.reward_sum


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def _dataset(prompts_file: Path, tokenizer: Any) -> Any:
    """The prompt rows as a datasets.Dataset, after checking that TRL's tokenization of each prompt (the tokenizer
    called on the text, special tokens added) gives the prompt ids rl_recipes encodes."""
    from datasets import Dataset

    rows = [json.loads(line) for line in prompts_file.read_text().splitlines() if line.strip()]
    encoded = tokenizer(text=[row["prompt"] for row in rows])["input_ids"]
    for index, (row, ids) in enumerate(zip(rows, encoded, strict=True)):
        if list(ids) != row["prompt_ids"]:
            raise SystemExit(
                f"row {index}: TRL tokenizes {row['prompt']!r} as {ids}, rl_recipes as {row['prompt_ids']}"
            )
    return Dataset.from_list([{"prompt": row["prompt"], "ground_truth": row["ground_truth"]} for row in rows])


def _retain_host_memory() -> bool:
    """rl_runtime's `retain_freed_host_memory`, loaded from its file: the TRL venv lacks rl_runtime's dependencies."""
    path = REPO / "packages/rl-runtime/src/rl_runtime/workers/_host_memory.py"
    spec = importlib.util.spec_from_file_location("_host_memory", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.retain_freed_host_memory()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="HF model folder with its tokenizer")
    parser.add_argument("--prompts-file", type=Path, required=True, help="jsonl of prompt, ground_truth, prompt_ids")
    parser.add_argument("--prompts", type=int, required=True, help="prompts per step")
    parser.add_argument("--samples", type=int, required=True, help="completions per prompt")
    parser.add_argument("--max-new-tokens", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--max-steps", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads; 0 keeps torch's default")
    parser.add_argument(
        "--retain-host-memory", action="store_true", help="raise glibc's mmap/trim thresholds as our workers do"
    )
    args = parser.parse_args()
    protocol = claim_stdout()
    sys.path[:0] = [str(source) for source in SOURCES]

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.retain_host_memory and not _retain_host_memory():
        raise SystemExit("--retain-host-memory: this C library has no mallopt")
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(args.model))
    model = AutoModelForCausalLM.from_pretrained(str(args.model), dtype=torch.float32)
    count = GenerationCount()
    with tempfile.TemporaryDirectory(prefix="grpo_vs_trl_") as output_dir:
        config = GRPOConfig(
            output_dir=output_dir,
            use_cpu=True,
            bf16=False,
            gradient_checkpointing=False,  # ours does not recompute activations either
            per_device_train_batch_size=args.prompts * args.samples,
            num_generations=args.samples,
            steps_per_generation=1,
            beta=0.0,
            learning_rate=args.lr,
            lr_scheduler_type="constant",
            weight_decay=0.0,
            max_grad_norm=1.0,
            max_completion_length=args.max_new_tokens,
            temperature=1.0,
            max_steps=args.max_steps + STEPS_MARGIN,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            dataloader_num_workers=0,
            seed=args.seed,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=make_reward(count),
            args=config,
            train_dataset=_dataset(args.prompts_file, tokenizer),
            processing_class=tokenizer,
            callbacks=[make_gate(protocol, count, {"retain_host_memory": args.retain_host_memory})],
        )
        trainer.train()


if __name__ == "__main__":
    main()
