"""Building a sharded engine from rank 0's weights: two real gloo processes against every rank building the
full model (the same numbers, lower peak memory on rank 1), and the failure of rank 0's load."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from _meta_init_workers import CASES, equivalence_scenario, memory_scenario
from _training_helpers import VOCAB, llama_config, qwen_config, reference_model, run_distributed, save_tokenizer

from rl_engines.training import ModelConfig, ModelSourceError

EQUAL_TOLERANCE = 1e-6
MEMORY_SAVING = 0.75
"""Rank 1's peak growth with the broadcast must stay under this fraction of the growth without it: it holds
its half of the shards and one tensor in flight, against the full model plus its shards."""


@pytest.fixture(scope="module")
def equivalence(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("meta_init")
    folder, corrupt = out / "model", out / "corrupt"
    reference_model().save_pretrained(str(folder))
    save_tokenizer(folder, VOCAB)
    shutil.copytree(folder, corrupt)
    (corrupt / "model.safetensors").write_bytes(b"not a safetensors file")
    run_distributed(equivalence_scenario, out, str(folder), str(corrupt))
    return [torch.load(out / f"equivalence_rank{rank}.pt", weights_only=False) for rank in range(2)]


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, list[dict]]:
    """Each way measured in its own fresh pair of processes, so neither inherits the other's freed memory."""
    out = tmp_path_factory.mktemp("meta_memory")
    results = {}
    for broadcast in (True, False):
        run_distributed(memory_scenario, out, broadcast)
        results[broadcast] = [torch.load(out / f"memory_{broadcast}_{rank}.pt") for rank in range(2)]
    return results


def test_broadcast_from_rank0_is_opt_in() -> None:
    assert not ModelConfig(hf_config=qwen_config()).broadcast_from_rank0


@pytest.mark.parametrize("case", [*CASES, "folder"])
def test_rank0_broadcast_gives_the_same_forward_and_step(equivalence: list[dict], case: str) -> None:
    for rank in equivalence:
        meta, full = rank[case, True], rank[case, False]
        for name in ("log_probs", "entropy", "values"):
            expected = getattr(full["outputs"], name)
            if expected is not None:
                torch.testing.assert_close(getattr(meta["outputs"], name), expected, atol=EQUAL_TOLERANCE, rtol=0)
        assert meta["step"].loss == pytest.approx(full["step"].loss, abs=EQUAL_TOLERANCE)
        assert meta["step"].grad_norm == pytest.approx(full["step"].grad_norm, abs=EQUAL_TOLERANCE)
        assert meta["weights"].keys() == full["weights"].keys()
        for name, tensor in full["weights"].items():
            torch.testing.assert_close(meta["weights"][name], tensor, atol=EQUAL_TOLERANCE, rtol=0, msg=name)
        assert meta["optimized"] == full["optimized"]
        assert meta["rng_untouched"] and full["rng_untouched"]


@pytest.mark.parametrize("case", [*CASES, "folder"])
def test_non_persistent_buffers_are_rank0s_on_every_rank(equivalence: list[dict], case: str) -> None:
    for rank in equivalence:
        meta, full = rank[case, True]["buffers"], rank[case, False]["buffers"]
        assert any(name.endswith("rotary_emb.inv_freq") for name in full)
        assert meta.keys() == full.keys()
        for name, buffer in full.items():
            assert torch.equal(meta[name], buffer), name


def test_tied_embeddings_stay_one_parameter(equivalence: list[dict]) -> None:
    for rank in equivalence:
        assert rank["llama_tied", True]["tied"] and rank["llama_tied", False]["tied"]
        assert not rank["qwen", True]["tied"]
        # The tied pair is one optimizer parameter, as in the plain model (whose state dict names it twice).
        plain = reference_model(llama_config())
        assert len(plain.state_dict()) == len(list(plain.parameters())) + 1
        assert rank["llama_tied", True]["optimized"] == len(list(plain.parameters()))


def test_critic_value_head_comes_from_rank0(equivalence: list[dict]) -> None:
    for rank in equivalence:
        weights = rank["critic", True]["weights"]
        assert weights["value_head.weight"].abs().max() > 0
        assert rank["critic", True]["outputs"].values.abs().max() > 0


def test_rank0_load_failure_is_raised_on_every_rank(equivalence: list[dict]) -> None:
    source_error, other_error = equivalence[0]["corrupt_error"], equivalence[1]["corrupt_error"]
    assert source_error[0] != ModelSourceError.__name__  # rank 0 raises the loader's own error
    assert other_error[0] == ModelSourceError.__name__
    assert other_error[1].startswith(f"rank 0 could not build the model it broadcasts ({source_error[0]}")
    assert "ModelConfig.broadcast_from_rank0=False" in other_error[1]


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="peak memory is read from Linux's /proc")
def test_rank1_peak_memory_is_lower_with_the_broadcast(memory: dict[bool, list[dict]]) -> None:
    with_broadcast, without = memory[True][1], memory[False][1]
    model_bytes = with_broadcast["model_bytes"]
    # Without the broadcast rank 1 materialises the whole model; with it, never.
    assert without["growth"] > model_bytes
    assert with_broadcast["growth"] < model_bytes
    assert with_broadcast["growth"] < MEMORY_SAVING * without["growth"]
