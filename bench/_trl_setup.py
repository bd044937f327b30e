"""Setting up `grpo_vs_trl.py`: TRL's own venv (torch pinned), the shared SFT model, and the prompt rows TRL trains on.

Everything is built locally: the venv from the package registries, the model by our `rl-recipes sft` (the
embedded default's tiny Llama and its generated arithmetic data), the prompts by rl_recipes' own prompt functions.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
CONSTRAINTS = REPO / "constraints.txt"
TORCH_PIN = "torch==2.13.0"
"""The torch every environment of this repository runs (constraints.txt); TRL's venv gets the same CPU build."""
VERSION_CHECK = (
    "import importlib.metadata as m, trl, torch; print(m.version('trl'), torch.__version__.split('+')[0], "
    "torch.version.cuda)"
)
MODEL_DIR = "model"
DATA_DIR = "data"
TRAIN_FILE = "train.jsonl"
CONFIG_FILE = "config.json"


def venv_python(venv: Path) -> Path:
    """The interpreter of the venv at `venv`."""
    return venv / "bin" / "python"


def _installed(venv: Path) -> tuple[str, str, str] | None:
    """(trl version, torch version, torch's CUDA version or None) in the venv, or None when either is missing."""
    python = venv_python(venv)
    if not python.is_file():
        return None
    check = subprocess.run([str(python), "-c", VERSION_CHECK], capture_output=True, text=True)
    if check.returncode != 0:
        return None
    trl, torch, cuda = check.stdout.split()
    return trl, torch, cuda


def _matches(version: str, spec: str) -> bool:
    """Whether `version` matches `spec`, a version or a `1.16.*` prefix."""
    return version.startswith(spec[:-1]) if spec.endswith("*") else version == spec


def ensure_trl_venv(venv: Path, trl_spec: str) -> Path:
    """Create (or reuse) a venv holding `trl==trl_spec` over the pinned CPU torch; return its interpreter.

    torch is installed first under constraints.txt, then TRL under the same constraints, so pip keeps torch at
    the pin instead of pulling a CUDA build. pip uses its one default cache (honouring PIP_CACHE_DIR).
    """
    found = _installed(venv)
    if found is not None:
        trl, torch, cuda = found
        if _matches(trl, trl_spec) and torch == TORCH_PIN.split("==")[1] and cuda == "None":
            logger.info("TRL venv: reusing %s (trl %s, torch %s CPU)", venv, trl, torch)
            return venv_python(venv)
        raise SystemExit(
            f"{venv} holds trl {trl} / torch {torch} (CUDA {cuda}), not trl {trl_spec} / {TORCH_PIN} CPU; "
            f"delete it (rm -r {venv}) or pass another --venv"
        )
    logger.info("TRL venv: creating %s (a few minutes the first time)", venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv_python(venv)), "-m", "pip", "install", "--quiet", "-c", str(CONSTRAINTS)]
    subprocess.run([*pip, TORCH_PIN], check=True)
    subprocess.run([*pip, f"trl=={trl_spec}"], check=True)
    found = _installed(venv)
    if found is None or not _matches(found[0], trl_spec) or found[2] != "None":
        raise SystemExit(f"installing trl=={trl_spec} into {venv} gave {found}; see pip's output above")
    return venv_python(venv)


def cli_command() -> list[str]:
    """The `rl-recipes` command of the running environment."""
    beside = Path(sys.executable).parent / "rl-recipes"
    found = str(beside) if beside.is_file() else shutil.which("rl-recipes")
    if found is None:
        raise SystemExit("no `rl-recipes` command in this environment; install packages/rl-recipes first")
    return [found]


def ensure_sft(sft_dir: Path) -> Path:
    """The embedded default after its SFT warm start, in `sft_dir` (made by `rl-recipes sft` unless already there).
    Returns the model folder; the data rows are in `sft_dir/data`."""
    model = sft_dir / MODEL_DIR
    if (model / CONFIG_FILE).is_file() and (sft_dir / DATA_DIR / TRAIN_FILE).is_file():
        logger.info("SFT model: reusing %s", model)
        return model
    logger.info("SFT model: running `rl-recipes sft output_dir=%s` (about a minute on 2 free cores)", sft_dir)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    subprocess.run([*cli_command(), "sft", f"output_dir={sft_dir}"], check=True, env=env)
    return model


def write_prompt_rows(model: Path, train_file: Path, out_file: Path) -> int:
    """Write TRL's training rows: each training question as rl_recipes prompts it (text and token ids) with its
    ground truth; returns the row count."""
    from rl_recipes.tasks import build_prompt, encode_prompt, extract_ground_truth, load_tokenizer

    tokenizer = load_tokenizer(model)
    rows = [json.loads(line) for line in train_file.read_text().splitlines() if line.strip()]
    with out_file.open("w") as out:
        for row in rows:
            prompt = build_prompt(row["question"], tokenizer)
            record = {
                "prompt": prompt,
                "ground_truth": extract_ground_truth(row["answer"]),
                "prompt_ids": encode_prompt(prompt, tokenizer),
            }
            out.write(json.dumps(record) + "\n")
    return len(rows)
