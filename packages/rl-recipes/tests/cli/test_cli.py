"""The command line: list, --help with every config field, and bad input as an exit status 2 with the reason."""

from __future__ import annotations

import pytest

from rl_recipes.cli import build_parser, main
from rl_recipes.cli._main import parse_args


def test_list_names_recipes_pipelines_estimators_losses_and_rewards(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for expected in ("recipes:", "dapo", "pipelines:", "advantage estimators:", "rloo", "policy losses:", "gspo"):
        assert expected in out
    assert "gsm8k_exact_match" in out
    assert "GRPO: group-relative advantages, no critic" in out  # each pipeline's description


def test_train_help_lists_config_fields_with_defaults_and_docs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "actor.optimizer.lr = 1e-06" in out and "Peak learning rate." in out
    # The engine sections are rl-engines' own config dataclasses, documented where they are defined.
    assert "actor.micro_batch.max_tokens_per_micro_batch = 8192" in out and "Token budget of one forward" in out
    assert "critic.model.path = null" in out and "algorithm.value_clip = 0.5" in out
    assert "task.reward = 'gsm8k_exact_match'" in out
    assert "warm_start:" in out
    assert "e.g. actor.optimizer.lr=1e-6" in out


def test_sft_help_gives_an_override_of_its_own_flat_config(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["sft", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "e.g. lr=1e-3" in out and "actor." not in out
    assert "lr = 0.003" in out


def test_overrides_after_the_config_option_are_taken_and_other_extras_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = build_parser()
    args = parse_args(parser, ["train", "grpo", "data.seed=1", "--config", "my.yaml", "actor.optimizer.lr=1e-6"])
    assert args.config == "my.yaml" and args.overrides == ["data.seed=1", "actor.optimizer.lr=1e-6"]
    with pytest.raises(SystemExit) as exit_info:
        parse_args(parser, ["train", "grpo", "--config", "my.yaml", "stray"])
    assert exit_info.value.code == 2 and "unrecognized arguments: stray" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(parser, ["list", "a=b"])  # list takes no overrides


def test_a_bad_override_exits_2_naming_the_field(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "grpo", "batch.prompts_per_step=zero"]) == 2
    assert "batch.prompts_per_step" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("actor.optimizer.lr=0", "actor.optimizer.lr: expected a finite number > 0, found 0.0"),
        ("rollout.engine=sglang", "rollout.engine: expected an engine the trainer can build"),
    ],
)
def test_an_engine_setting_the_engine_refuses_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], override: str, message: str
) -> None:
    assert main(["train", "grpo", override]) == 2
    assert message in capsys.readouterr().err


def test_eval_of_a_missing_dataset_exits_2(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    assert main(["eval", "--model", str(tmp_path), "--data", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl" in capsys.readouterr().err


def test_an_error_embedding_a_worker_traceback_keeps_its_first_and_last_lines() -> None:
    from rl_recipes.cli._logs import one_line

    message = (
        'worker rank 1 failed to start: the actor died\nTraceback (most recent call last):\n  File "x.py", line 3\n'
        "    raise ModelSourceError(...)\nModelSourceError: ModelConfig.path='m' is not an existing folder; point it\n"
    )
    expected = "worker rank 1 failed to start: the actor died ... ModelSourceError: ModelConfig.path='m' is not an"
    assert one_line(message) == expected + " existing folder; point it"
    assert one_line("2 problems in the configuration:\n  - a: expected x\n  - b: expected y") == (
        "2 problems in the configuration: - a: expected x - b: expected y"
    )
