"""`run_sft` end to end on the embedded default: the loss falls, metrics and the model folder are written, it runs
under an initialised gloo group, and bad inputs fail before the first step."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest
import torch.distributed as dist
import torch.multiprocessing as mp
from _sft_ranks import rank_main
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

from rl_recipes.embedded import DEFAULT_HELDOUT_SIZE, build_embedded_tokenizer, write_arithmetic_dataset
from rl_recipes.evaluation import EvalResult
from rl_recipes.sft import HELDOUT_METRIC, METRICS_FILE, VALIDATION_METRIC, SFTConfig, SFTError, SFTStep, run_sft
from rl_recipes.tasks import DatasetError

TINY = {
    "steps": 8,
    "batch_size": 4,
    "lr": 1e-2,
    "warmup_steps": 0,
    "eval_max_new_tokens": 4,
    "eval_every": 0,
    "stop_at_exact_match": None,
    "validation_size": 0,
}


def test_tiny_run_learns_and_writes_the_run_folder(tmp_path: Path) -> None:
    seen: list[SFTStep] = []
    config = SFTConfig(output_dir=str(tmp_path), **{**TINY, "eval_every": 4, "validation_size": 20})
    result = run_sft(config, on_step=seen.append)
    assert result.steps == 8 and not result.stopped_early and [s.step for s in seen] == list(range(1, 9))
    assert result.losses[-1] < result.losses[0] - 1.0  # from ~ln(vocab) = 4.7 towards the answer format
    assert (tmp_path / "data" / "train.jsonl").is_file()  # the embedded dataset, no file configured
    records = [json.loads(line) for line in (tmp_path / METRICS_FILE).read_text().splitlines()]
    steps = [r for r in records if "loss" in r]
    assert [r["step"] for r in steps] == list(range(1, 9))
    assert [r["loss"] for r in steps] == pytest.approx(list(result.losses))
    assert all(r["tokens"] > 0 and r["seconds"] > 0 and "grad_norm" in r and "lr" in r for r in steps)
    validation = [r for r in records if VALIDATION_METRIC in r]
    assert [r["step"] for r in validation] == [0, 4, 8]
    assert result.eval_curve == tuple((r["step"], r[VALIDATION_METRIC]) for r in validation)
    heldout = [r for r in records if HELDOUT_METRIC in r]
    assert [r["step"] for r in heldout] == [8]  # the held-out rows are scored once, after training
    assert result.heldout_exact_match == heldout[0][HELDOUT_METRIC]
    assert 0.0 <= result.heldout_exact_match <= 1.0
    model = AutoModelForCausalLM.from_pretrained(str(result.model_dir))
    tokenizer = AutoTokenizer.from_pretrained(str(result.model_dir))
    assert model.config.vocab_size == len(tokenizer) and tokenizer.eos_token_id == model.generation_config.eos_token_id


def test_runs_under_an_initialised_gloo_group(tmp_path: Path) -> None:
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        result = run_sft(SFTConfig(output_dir=str(tmp_path / "run"), **{**TINY, "steps": 3}))
    finally:
        dist.destroy_process_group()
    assert len(result.losses) == 3 and result.heldout_exact_match is not None
    assert (result.model_dir / "model.safetensors").is_file()


def _files(tmp_path: Path) -> dict[str, str]:
    paths = write_arithmetic_dataset(tmp_path / "data", train_size=12, heldout_size=4, seed=0)
    return {"train_file": str(paths["train"]), "heldout_file": str(paths["heldout"])}


def test_configured_files_and_epochs(tmp_path: Path) -> None:
    tiny = {**TINY, "steps": None, "epochs": 1.0, "eval_max_new_tokens": 2}
    config = SFTConfig(output_dir=str(tmp_path / "run"), **tiny, **_files(tmp_path))
    result = run_sft(config)
    assert result.steps == 3 and result.eval_curve == ()  # 12 rows / 4 per step; no periodic evaluation
    assert result.heldout_exact_match is not None
    periodic = run_sft(attrs.evolve(config, output_dir=str(tmp_path / "run3"), eval_every=2))
    assert [step for step, _ in periodic.eval_curve] == [0, 2, 3]  # on the held-out rows, lacking validation ones
    assert periodic.eval_curve[-1][1] == periodic.heldout_exact_match
    no_heldout = attrs.evolve(config, output_dir=str(tmp_path / "run2"), heldout_file=None)
    assert run_sft(no_heldout).heldout_exact_match is None


class ScriptedScorerDouble:
    """Test double for the training scorer: returns the scripted exact matches in turn and records its calls."""

    script: ClassVar[list[float]] = []
    calls: ClassVar[list[tuple[int, int]]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def score(self, step: int, samples: list[Any]) -> EvalResult:
        ScriptedScorerDouble.calls.append((step, len(samples)))
        value = ScriptedScorerDouble.script.pop(0)
        return EvalResult(value, value, 1, len(samples), 1, 0, (), 0.0)

    def close(self) -> None:
        pass


def test_stops_early_once_validation_reaches_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rl_recipes.sft._train.TrainingScorer", ScriptedScorerDouble)
    ScriptedScorerDouble.script = [0.0, 0.1, 0.25, 0.2]  # validation at steps 0, 2, 4; then held-out
    ScriptedScorerDouble.calls = []
    tiny = {**TINY, "eval_every": 2, "stop_at_exact_match": 0.2, "validation_size": 3}
    result = run_sft(SFTConfig(output_dir=str(tmp_path / "run"), **tiny, **_files(tmp_path)))
    assert result.stopped_early and result.steps == 4 and len(result.losses) == 4
    assert result.eval_curve == ((0, 0.0), (2, 0.1), (4, 0.25))
    assert result.heldout_exact_match == 0.2
    assert ScriptedScorerDouble.calls == [(0, 3), (2, 3), (4, 3), (4, 4)]  # 3 validation rows, 4 held-out rows
    assert (result.model_dir / "model.safetensors").is_file()


def _tokenizer_without_eos(folder: Path) -> Path:
    embedded = build_embedded_tokenizer()
    PreTrainedTokenizerFast(tokenizer_object=embedded.backend_tokenizer, pad_token="<pad>").save_pretrained(str(folder))
    return folder


@pytest.mark.parametrize(
    ("overrides", "error", "match"),
    [
        ({"train_file": "missing.jsonl"}, DatasetError, "dataset 'missing.jsonl' not found"),
        ({"model": "no/such/folder"}, SFTError, "SFTConfig.model='no/such/folder' is neither 'embedded' nor"),
        ({"tokenizer": "no/such/tokenizer"}, SFTError, "SFTConfig.tokenizer='no/such/tokenizer' is not an existing"),
        ({"tokenizer": "NO_EOS"}, SFTError, "has no eos token"),
        ({"max_length": 10}, SFTError, r"training rows has a prompt of >= SFTConfig.max_length=10"),
        ({"validation_size": 5000}, SFTError, r"SFTConfig.validation_size=5000 leaves no training rows"),
    ],
)
def test_bad_inputs_fail_before_training(tmp_path: Path, overrides: dict[str, Any], error: type, match: str) -> None:
    if overrides.get("tokenizer") == "NO_EOS":
        overrides = {"tokenizer": str(_tokenizer_without_eos(tmp_path / "tok"))}
    seen: list[SFTStep] = []
    with pytest.raises(error, match=match):
        run_sft(SFTConfig(output_dir=str(tmp_path / "run"), **{**TINY, **overrides}), on_step=seen.append)
    assert not seen and not (tmp_path / "run" / "model").exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run_two_ranks(runs: list[tuple[Path, int]]) -> list[list[tuple[int, str, Any, Any]]]:
    """Two spawned ranks of one gloo group run `run_sft` once per (folder, batch size) of `runs`, in order (one
    pair of processes for all: each spawn re-imports torch and transformers); each run's outcomes, by rank."""
    context = mp.get_context("spawn")
    queue = context.Queue()
    port = _free_port()
    plan = [(str(folder), batch_size) for folder, batch_size in runs]
    processes = [context.Process(target=rank_main, args=(rank, 2, port, plan, queue, TINY)) for rank in range(2)]
    for process in processes:
        process.start()
    outcomes = sorted(queue.get(timeout=300) for _ in range(len(processes) * len(runs)))
    for process in processes:
        process.join(timeout=60)
    by_run: list[list[tuple[int, str, Any, Any]]] = [[] for _ in runs]
    for rank, index, status, value, accuracy in outcomes:
        by_run[index].append((rank, status, value, accuracy))
    return by_run


@pytest.mark.slow
def test_two_ranks_train_the_same_model_and_reject_an_uneven_batch(tmp_path: Path) -> None:
    trained, outcomes = _run_two_ranks([(tmp_path / "a", 4), (tmp_path / "b", 3)])
    (_, status0, losses0, accuracy0), (_, status1, losses1, accuracy1) = trained
    assert (status0, status1) == ("ok", "ok")
    assert losses0 == losses1 and accuracy0 == accuracy1  # the global loss and rank 0's evaluation, on every rank
    assert len(losses0) == 3 and 0.0 <= accuracy0 <= 1.0
    assert len((tmp_path / "a" / "data" / "heldout.jsonl").read_text().splitlines()) == DEFAULT_HELDOUT_SIZE
    assert [status for _, status, _, _ in outcomes] == ["error", "error"]
    assert "SFTConfig.batch_size=3 does not divide over 2 ranks; use a multiple of 2" in outcomes[0][2]
