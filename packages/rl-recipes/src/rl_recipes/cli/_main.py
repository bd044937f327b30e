"""Argument parsing and the entry point; logging handlers are configured here and nowhere else."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from rl_recipes._errors import RecipeError
from rl_recipes.cli import _commands
from rl_recipes.cli._fields import describe_fields
from rl_recipes.recipes import RECIPES, RecipeConfig
from rl_recipes.sft import SFTConfig
from rl_runtime._errors import RLRuntimeError

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
EXIT_USAGE = 2
"""What argparse exits with for bad arguments; a config or data error is the user's input too."""


def _fields_epilog(cls: type) -> str:
    return "config fields (set any with key=value; defaults shown):\n  " + "\n  ".join(describe_fields(cls))


def _config_arguments(parser: argparse.ArgumentParser, example: str) -> None:
    parser.add_argument("--config", help="a YAML config file (default: the packaged embedded default)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help=f"dotted overrides, e.g. {example}")


def build_parser() -> argparse.ArgumentParser:
    """The `rl-recipes` parser with its five subcommands."""
    parser = argparse.ArgumentParser(prog="rl-recipes", description=__doc__)
    parser.add_argument("--log-level", default="INFO", help="logging level (DEBUG, INFO, WARNING)")
    commands = parser.add_subparsers(dest="command", required=True)
    formatter = argparse.RawDescriptionHelpFormatter

    train = commands.add_parser(
        "train", help="run an RL recipe", epilog=_fields_epilog(RecipeConfig), formatter_class=formatter
    )
    train.add_argument("recipe", choices=sorted(RECIPES), help="which recipe")
    _config_arguments(train, "actor.optimizer.lr=1e-6")
    train.set_defaults(run=_commands.train)

    sft = commands.add_parser(
        "sft", help="supervised warm start", epilog=_fields_epilog(SFTConfig), formatter_class=formatter
    )
    _config_arguments(sft, "lr=1e-3")
    sft.set_defaults(run=_commands.sft)

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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; a config, data or reward error prints its message and exits with status 2."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format=LOG_FORMAT)
    try:
        return args.run(args)
    except (RecipeError, RLRuntimeError, ValueError, KeyError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"rl-recipes {args.command}: error: {message}", file=sys.stderr)  # noqa: T201
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
