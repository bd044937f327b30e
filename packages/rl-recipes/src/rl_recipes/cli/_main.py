"""Argument parsing and the entry point; logging handlers are configured here and in `_logs` (the run's log file)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from rl_recipes._errors import RecipeError
from rl_recipes.cli import _commands
from rl_recipes.cli._fields import describe_fields
from rl_recipes.cli._logs import LOG_FORMAT, append_traceback, one_line
from rl_recipes.recipes import RECIPES, RecipeConfig
from rl_recipes.rm import RMConfig
from rl_recipes.sft import SFTConfig
from rl_runtime._errors import RLRuntimeError
from rl_runtime.trainer import TrainingInterrupted

EXIT_USAGE = 2
"""What argparse exits with for bad arguments; a config or data error is the user's input too."""
EXIT_SIGNAL_BASE = 128
"""A run stopped by a signal exits with 128 + its number (130 for SIGINT, 143 for SIGTERM), as a shell reports it."""


def _fields_epilog(cls: type) -> str:
    return "config fields (set any with key=value; defaults shown):\n  " + "\n  ".join(describe_fields(cls))


def _config_arguments(parser: argparse.ArgumentParser, example: str) -> None:
    parser.add_argument("--config", help="a YAML config file (default: the packaged embedded default)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help=f"dotted overrides, e.g. {example}")


def build_parser() -> argparse.ArgumentParser:
    """The `rl-recipes` parser with its subcommands."""
    parser = argparse.ArgumentParser(prog="rl-recipes", description=__doc__)
    parser.add_argument("--log-level", default="INFO", help="logging level (DEBUG, INFO, WARNING)")
    parser.add_argument(
        "--debug", action="store_true", help="on a config, data or reward error, print the traceback too"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    formatter = argparse.RawDescriptionHelpFormatter

    train = commands.add_parser(
        "train", help="run an RL recipe", epilog=_fields_epilog(RecipeConfig), formatter_class=formatter
    )
    train.add_argument("recipe", choices=sorted(RECIPES), help="which recipe")
    _config_arguments(train, "actor.optimizer.lr=1e-6")
    train.add_argument(
        "--take-over",
        action="store_true",
        help="start even though another live run holds trainer.output_dir (sets trainer.take_over=true)",
    )
    train.set_defaults(run=_commands.train)

    sft = commands.add_parser(
        "sft", help="supervised warm start", epilog=_fields_epilog(SFTConfig), formatter_class=formatter
    )
    _config_arguments(sft, "lr=1e-3")
    sft.set_defaults(run=_commands.sft)

    reward_model = commands.add_parser(
        "rm",
        help="train a reward model (Bradley-Terry on preference pairs) for a run's reward_model section",
        epilog=_fields_epilog(RMConfig),
        formatter_class=formatter,
    )
    _config_arguments(reward_model, "steps=100")
    reward_model.set_defaults(run=_commands.reward_model)

    evaluate = commands.add_parser(
        "eval", help="score a model folder on a GSM8K-format file, or a VLA folder's success per task in an env"
    )
    evaluate.add_argument("--model", required=True, help="a Hugging Face model folder (with its tokenizer)")
    evaluate.add_argument("--data", help="GSM8K-format rows: .jsonl, .parquet or a datasets folder")
    evaluate.add_argument("--env", help="a registered env (babyai): evaluate the VLA in --model there instead")
    evaluate.add_argument("--tasks", nargs="*", default=[], help="the env's tasks (default: its own list)")
    evaluate.add_argument("--first-trial", type=int, default=16, help="first trial (initial state) per task")
    evaluate.add_argument("--trials", type=int, default=16, help="trials per task, from --first-trial on")
    evaluate.add_argument("--max-steps", type=int, default=64, help="env steps per episode")
    evaluate.add_argument("--k", type=int, default=1, help="samples per prompt (pass@k)")
    evaluate.add_argument("--temperature", type=float, default=0.0, help="0 is greedy")
    evaluate.add_argument("--max-new-tokens", type=int, default=64, help="response budget")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.set_defaults(run=_commands.evaluate)

    export = commands.add_parser("export", help="write a Hugging Face folder from a training checkpoint")
    export.add_argument("checkpoint", help="a checkpoint folder: <output_dir>/checkpoints/step_N")
    export.add_argument("--out", required=True, help="the folder to write")
    export.set_defaults(run=_commands.export)

    listing = commands.add_parser("list", help="recipes, pipelines, estimators, losses and reward functions")
    listing.set_defaults(run=_commands.list_components)
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """`parser`'s arguments, with `key=value` overrides taken after options too (`train grpo --config my.yaml
    lr=1e-6`): argparse gives a `nargs="*"` positional only the values before the first option, and would refuse
    the rest as unrecognized."""
    args, extra = parser.parse_known_args(argv)
    overrides = [item for item in extra if "=" in item and not item.startswith("-")]
    if len(overrides) < len(extra) or (extra and not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if overrides:
        args.overrides = [*args.overrides, *overrides]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; a config, data or reward error prints one line (its message: the field, what was
    wrong, the fix) and exits with status 2. The traceback goes to the run's log file (`train`, once the config
    has loaded) and, with `--debug`, to stderr."""
    args = parse_args(build_parser(), argv)
    logging.basicConfig(level=args.log_level.upper(), format=LOG_FORMAT)
    args.log_file = None  # a command that opens a run log sets it (train: <trainer.output_dir>/train.log)
    try:
        return args.run(args)
    except TrainingInterrupted as stop:  # one line saying what was saved and how to resume, no traceback
        print(f"rl-recipes {args.command}: {stop}", file=sys.stderr)  # noqa: T201
        return EXIT_SIGNAL_BASE + stop.signal_number
    except KeyboardInterrupt:  # a second Ctrl-C outside the training loop (starting or closing the workers)
        print(  # noqa: T201
            f"rl-recipes {args.command}: interrupted; committed checkpoints under trainer.output_dir/checkpoints are "
            "kept: run the same command again to resume",
            file=sys.stderr,
        )
        return EXIT_SIGNAL_BASE + signal.SIGINT
    except (RecipeError, RLRuntimeError, ValueError, KeyError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        trace = traceback.format_exc()
        log_file: Path | None = args.log_file
        if log_file is not None:
            append_traceback(log_file, args.command, trace)
        if args.debug:
            print(trace, file=sys.stderr)  # noqa: T201
        where = ["--debug", *([str(log_file)] if log_file is not None else [])]
        hint = "" if args.debug else f" (traceback: {' or '.join(where)})"
        print(f"rl-recipes {args.command}: error: {one_line(str(message))}{hint}", file=sys.stderr)  # noqa: T201
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
