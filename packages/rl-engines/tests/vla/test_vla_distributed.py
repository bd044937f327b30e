"""The tiny VLA in the train engine over a real 2-process gloo group (FSDP2 and ddp) against one process."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _training_helpers import run_distributed
from _vla_helpers import reference_vla
from _vla_workers import LOCAL_BATCH, full_batch, vla_scenario
from test_vla_engine import ppo_loss_fn

from rl_core.losses import LossNormalizer
from rl_engines.training import ForwardOutput
from rl_engines.vla import TinyVLAForActionChunking, action_log_probs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["fsdp", "ddp"])
def ranks(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], Path, str]:
    mode = request.param
    out = tmp_path_factory.mktemp(f"vla_{mode}")
    run_distributed(vla_scenario, out, mode)
    return [torch.load(out / f"vla_{mode}_rank{r}.pt", weights_only=False) for r in range(2)], out, mode


def _plain(batch: dict[str, torch.Tensor], model: torch.nn.Module) -> torch.Tensor:
    log_probs, _ = action_log_probs(
        model, batch["instruction_ids"], batch["instruction_mask"], batch["pixel_values"], batch["action_tokens"], 1.0
    )
    return log_probs * batch["response_mask"]


def test_two_ranks_give_one_process_outputs_and_gradients(ranks: tuple[list[dict], Path, str]) -> None:
    saved, _, mode = ranks
    full = full_batch()
    model = reference_vla()
    log_probs = _plain(full, model)
    both = torch.cat([saved[0]["log_probs"], saved[1]["log_probs"]])
    torch.testing.assert_close(both, log_probs.detach(), atol=1e-5, rtol=0)
    assert all(rank["micro_batches"] > 1 for rank in saved)
    loss, _ = ppo_loss_fn(ForwardOutput(log_probs, None, None), full, LossNormalizer.from_mask(full["response_mask"]))
    loss.backward()
    for name, p in model.named_parameters():
        for rank in saved:
            torch.testing.assert_close(rank["gradients"][f"backbone.{name}"], p.grad, atol=1e-6, rtol=1e-4, msg=name)
    if mode == "fsdp":
        rank0 = torch.cat([saved[0]["rank0_log_probs"], saved[1]["rank0_log_probs"]])
        torch.testing.assert_close(rank0, log_probs.detach(), atol=1e-5, rtol=0)
    assert saved[0]["step"].loss == pytest.approx(float(loss.detach()), abs=1e-6)
    assert not saved[0]["step"].skipped


def test_export_of_two_ranks_reloads_with_their_log_probs(ranks: tuple[list[dict], Path, str]) -> None:
    saved, out, mode = ranks
    full = full_batch()
    reloaded = TinyVLAForActionChunking.from_pretrained(out / f"export_{mode}").eval()
    with torch.no_grad():
        expected = _plain(full, reloaded)
    for rank, rows in enumerate(saved):
        part = expected[rank * LOCAL_BATCH : (rank + 1) * LOCAL_BATCH]
        torch.testing.assert_close(rows["trained_log_probs"], part, atol=1e-5, rtol=0)
