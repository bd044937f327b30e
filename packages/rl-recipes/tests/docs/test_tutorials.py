"""The tutorials under docs/tutorials run in CI as a reader follows them, in a fresh temporary folder: every code
block with a `title="name"` is a file the reader creates, every `bash` block line a command the reader runs, in page
order; other blocks (`console`, untitled `python`) are only shown.

One Trainer run serves three tutorials: the first tutorial's files (model, data, reward, config), the reward
tutorial's check, then the plugin tutorial's package and its train command, which is the first tutorial's command
with the plugin loss added (asserted below), so the run trains on your data with your reward and a plugin loss;
the resume / export / eval tutorial then works on its folder.

Two liberties, both to keep CI cheap and its environment clean: `pip install X` installs with `--no-deps --target
<folder>` (and `--no-build-isolation` where setuptools is installed), a folder put on the path of every later
command; and the commands that need no Ray (`python
script.py`, `rl-recipes list / export / eval`) run in this process, with the same arguments in the same folder,
saving an interpreter start and the imports each. `rl-recipes train` runs as its own process, as a reader's does."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import os
import re
import runpy
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rl_core.losses import POLICY_LOSSES
from rl_recipes.cli import main

TUTORIALS = Path(__file__).resolve().parents[4] / "docs" / "tutorials"
CODE = TUTORIALS / "code"
"""Files a page includes with pymdownx.snippets, from mkdocs.yml's snippet base path."""
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
TITLE = re.compile(r'title="([^"]+)"')
SNIPPET = re.compile(r"^--8<--\n([^\n]+)\n--8<--$")
"""A block snippet (one file between two `--8<--` lines), the form ruff's Markdown formatting leaves alone."""
COMMAND_TIMEOUT_S = 600
TRAIN = "rl-recipes train "
IN_PROCESS = ("rl-recipes list", "rl-recipes export ", "rl-recipes eval ")
PLUGIN_LOSS = "clipped_reinforce"
PLUGIN_MODULE = "my_algos"


@dataclass(frozen=True)
class Step:
    """A file to create (`path` set) or a command to run."""

    text: str
    path: str | None = None


def tutorial_steps(page: str) -> list[Step]:
    """The steps of docs/tutorials/`page`, in page order."""
    return list(_steps((TUTORIALS / page).read_text()))


def _steps(markdown: str) -> Iterator[Step]:
    for match in FENCE.finditer(markdown):
        language, attributes, body = match.groups()
        title = TITLE.search(attributes)
        if title is not None:
            included = SNIPPET.match(body.strip())
            yield Step((CODE / included.group(1)).read_text() if included else body, title.group(1))
        elif language == "bash":
            yield from (Step(line.strip()) for line in body.splitlines() if line.strip() and not line.startswith("#"))


class Reader:
    """Follows steps in `folder` (the working directory while the test runs) with the test's interpreter and its
    `rl-recipes` first on PATH; `pip install` goes to `site`, which every later command sees."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.folder = folder
        self.site = folder / ".site-packages"
        self.site.mkdir()
        monkeypatch.chdir(folder)
        monkeypatch.syspath_prepend(str(self.site))
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        pythonpath = os.pathsep.join(filter(None, [str(self.site), os.environ.get("PYTHONPATH")]))
        self.env = {**os.environ, "PATH": path, "PYTHONPATH": pythonpath, "RAY_AUTH_MODE": "disabled"}
        self.outputs: dict[str, str] = {}

    def follow(self, steps: Iterable[Step]) -> None:
        for step in steps:
            if step.path is not None:
                target = self.folder / step.path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(step.text)
                continue
            started = time.monotonic()
            self.outputs[step.text] = self.run(step.text)
            print(f"{time.monotonic() - started:6.1f} s  {step.text}")  # noqa: T201 (pytest -s: what CI pays)

    def run(self, command: str) -> str:
        argv = shlex.split(command)
        if argv[0] == "python" and len(argv) == 2 and argv[1].endswith(".py"):
            return _in_process(lambda: runpy.run_path(argv[1], run_name="__main__"), command)
        if command.startswith(IN_PROCESS):
            return _in_process(lambda: main(argv[1:]), command)
        if argv[:2] == ["pip", "install"]:
            argv = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(self.site)]
            # Building in an isolated environment installs setuptools afresh each time (tens of seconds).
            argv += ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
            argv += shlex.split(command)[2:]
        else:
            argv = ["bash", "-euo", "pipefail", "-c", command]
        done = subprocess.run(
            argv, cwd=self.folder, env=self.env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"`{command}` exited {done.returncode}:\n{output[-4000:]}"
        return output


def _in_process(call: object, command: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = call()  # type: ignore[operator]
    assert status in (0, None) or isinstance(status, dict), f"`{command}` returned {status}:\n{out.getvalue()}"
    return out.getvalue()


def _split_at(steps: list[Step], command: str) -> tuple[list[Step], Step, list[Step]]:
    [index] = [i for i, step in enumerate(steps) if step.path is None and step.text.startswith(command)]
    return steps[:index], steps[index], steps[index + 1 :]


@pytest.fixture
def plugin_forgotten() -> Iterator[None]:
    """The plugin tutorial registers its loss in this process too (`rl-recipes list` loads the plugins): undo it."""
    yield
    POLICY_LOSSES.pop(PLUGIN_LOSS, None)
    sys.modules.pop(PLUGIN_MODULE, None)


@pytest.mark.slow
def test_own_data_reward_plugin_then_resume_export_eval_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plugin_forgotten: None
) -> None:
    reader = Reader(tmp_path, monkeypatch)
    own_before, own_train, own_after = _split_at(tutorial_steps("own-model-and-data.md"), TRAIN)
    plugin_before, plugin_train, plugin_after = _split_at(tutorial_steps("plugin.md"), TRAIN)
    assert plugin_train.text.startswith(own_train.text + " "), "the plugin tutorial trains with the first one's command"

    reader.follow(own_before)  # stand-in model, train.jsonl / val.jsonl, my_reward.py, my-run.yaml
    assert (tmp_path / "my-model" / "config.json").is_file()
    reader.follow(tutorial_steps("reward-function.md"))
    checked = reader.outputs["python check_reward.py"]
    assert "right answer: 1.0" in checked and "refused: reward function spec 'bad_reward.py:reward'" in checked

    reader.follow([*plugin_before, plugin_train, *plugin_after])
    assert PLUGIN_LOSS in reader.outputs["rl-recipes list"]
    run_dir = tmp_path / "runs" / "mine"
    assert f"policy_loss: {PLUGIN_LOSS}" in (run_dir / "config.yaml").read_text()
    reader.follow(own_after)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["heldout_reward_before"] is not None
    for name in ("metrics.jsonl", "reward_curve.png", "train.log", "checkpoints/step_00000002/manifest.json"):
        assert (run_dir / name).is_file(), name

    reader.follow(tutorial_steps("resume-export-eval.md"))
    resumed = next(out for command, out in reader.outputs.items() if "trainer.total_steps=3" in command)
    assert "resumed from runs/mine/checkpoints/step_00000002 after 2 steps" in resumed
    assert (tmp_path / "my-trained-model" / "config.json").is_file()
    evaluated = next(out for command, out in reader.outputs.items() if command.startswith("rl-recipes eval"))
    assert re.search(r"my-trained-model on val.jsonl: mean reward [\d.]+, pass@1 [\d.]+ over 4 prompts", evaluated)


def test_rl_core_alone_runs_as_written_and_imports_only_torch_and_rl_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = tutorial_steps("rl-core-alone.md")
    reader = Reader(tmp_path, monkeypatch)
    reader.follow(steps)
    printed = reader.outputs["python rl_core_alone.py"]
    first, last = map(float, re.findall(r"mean reward ([\d.]+) -> ([\d.]+)", printed)[0])
    assert last > first + 0.3
    [script] = [step.text for step in steps if step.path == "rl_core_alone.py"]
    imported = {
        (node.module or "" if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(ast.parse(script))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported == {"torch", "rl_core"}  # and rl_core imports torch only (import-linter, nox -s lint)
