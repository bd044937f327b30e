"""Rows the batch marks inert (`inert_rows`: zero advantage under PPO's loss) run their forward without autograd: the
step's gradients, loss, metrics and reported outputs equal the whole batch's to float rounding, and the backward sees
only the other rows."""

from __future__ import annotations

import pytest
import torch
from _training_helpers import engine_config, ppo_loss_fn, rollout_batch

from rl_core.objectives import PolicyObjective
from rl_core.schema import ADVANTAGES, ATTENTION_MASK, INERT_ROWS, OLD_LOG_PROBS, RESPONSE_MASK
from rl_engines.training import BatchError, ForwardOutput, ForwardSpec, FSDPEngine, LossOutput, NormalizedLoss
from rl_engines.training import _inert_rows as inert_module
from rl_engines.training import _step as step_module
from rl_engines.training._forward import forward_micro_batch

ZERO_ROWS = (1, 2, 4)


def _batch() -> dict[str, torch.Tensor]:
    batch = rollout_batch(6, seed=0)
    batch[ADVANTAGES][list(ZERO_ROWS)] = 0.0
    return batch


def _zero_advantage(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return ~(batch[ADVANTAGES].ne(0) & batch[RESPONSE_MASK].bool()).any(dim=-1)


class _Recording:
    """`ppo_loss_fn` that keeps each micro-batch's detached log-probs (by the batch's row index) and whether they
    carried a gradient."""

    def __init__(self) -> None:
        self.log_probs: dict[int, torch.Tensor] = {}
        self.with_grad: list[bool] = []

    def __call__(self, outputs: ForwardOutput, micro_batch: dict[str, torch.Tensor], normalizer) -> LossOutput:
        assert outputs.log_probs is not None
        self.with_grad.append(outputs.log_probs.requires_grad)
        for row, values in zip(micro_batch["row"].tolist(), outputs.log_probs.detach(), strict=True):
            self.log_probs[row] = values
        return ppo_loss_fn(outputs, micro_batch, normalizer)


def _run(
    inert: bool, monkeypatch: pytest.MonkeyPatch, frozen_rows: list[list[int]] | None = None
) -> tuple[dict, dict, _Recording, list[list[int]], ForwardOutput | None]:
    engine = FSDPEngine.from_config(engine_config())
    batch = {**_batch(), "row": torch.arange(6)}
    if inert:
        batch[INERT_ROWS] = _zero_advantage(batch)
    record = _Recording()
    loss = NormalizedLoss(record, "token-mean")
    grad_rows: list[list[int]] = []

    def counting(network, micro_batch, spec, **kwargs):
        if torch.is_grad_enabled():
            grad_rows.append(micro_batch["row"].tolist())
        elif frozen_rows is not None:
            frozen_rows.append(micro_batch["row"].tolist())
        return forward_micro_batch(network, micro_batch, spec, **kwargs)

    monkeypatch.setattr(inert_module, "forward_micro_batch", counting)
    monkeypatch.setattr(step_module, "forward_micro_batch", counting)
    gradients = engine.compute_gradients(batch, loss, ForwardSpec(entropy=True))
    result = engine.train_step(batch, loss, ForwardSpec(entropy=True, return_outputs=True))
    metrics = {"loss": result.loss, "norm": result.grad_norm, **result.metrics}
    return gradients, metrics, record, grad_rows, result.outputs


@pytest.mark.parametrize("by_length", [False, True], ids=["one_frozen_forward", "frozen_forward_by_length"])
def test_inert_rows_skip_the_backward_and_keep_gradients_loss_and_outputs(
    monkeypatch: pytest.MonkeyPatch, by_length: bool
) -> None:
    whole_grads, whole, whole_record, whole_rows, _ = _run(False, monkeypatch)
    if by_length:  # every distinct length its own frozen forward (the defaults group only larger micro-batches)
        monkeypatch.setattr(inert_module, "MIN_LENGTH_GROUP_ROWS", 1)
        monkeypatch.setattr(inert_module, "LENGTH_GROUP_RATIO", 1.0)
    frozen_rows: list[list[int]] = []
    split_grads, split, split_record, split_rows, split_outputs = _run(True, monkeypatch, frozen_rows)
    lengths = _batch()[ATTENTION_MASK].sum(dim=-1)
    frozen = [row for rows in frozen_rows for row in rows]
    assert set(frozen) <= set(ZERO_ROWS) and sorted(frozen + [row for rows in split_rows for row in rows]) == sorted(
        2 * list(range(6))
    )
    if by_length:
        assert len({int(lengths[row]) for row in ZERO_ROWS}) > 1  # the rows do split
        assert all(len({int(lengths[row]) for row in rows}) == 1 for rows in frozen_rows), frozen_rows
        assert len(frozen_rows) > 2
    assert whole_grads.keys() == split_grads.keys()
    for name, grad in whole_grads.items():
        assert grad.abs().max() > 0, name
        torch.testing.assert_close(split_grads[name], grad, atol=1e-6, rtol=1e-5, msg=name)
    assert split.keys() == whole.keys() and "ppo_kl" in whole
    for name, value in whole.items():
        assert split[name] == pytest.approx(value, rel=1e-5, abs=1e-7), name
    assert split_record.log_probs.keys() == whole_record.log_probs.keys() == set(range(6))
    for row, values in whole_record.log_probs.items():
        torch.testing.assert_close(split_record.log_probs[row], values, atol=1e-6, rtol=1e-5)
    # ForwardSpec.return_outputs: the training forward's outputs, merged in the batch's row order, without grad.
    assert split_outputs is not None and split_outputs.log_probs is not None and split_outputs.values is None
    assert split_outputs.entropy is not None and not split_outputs.log_probs.requires_grad
    for row, values in split_record.log_probs.items():
        torch.testing.assert_close(split_outputs.log_probs[row], values.float())
    # Two steps (compute_gradients, train_step): the whole batch ran every row with autograd; the split one ran
    # a zero-advantage row with autograd only as the one row kept of a micro-batch of nothing but such rows.
    assert sorted(row for rows in whole_rows for row in rows) == sorted(2 * list(range(6)))
    for rows in split_rows:
        assert len(rows) == 1 or not set(rows) & set(ZERO_ROWS), rows
    assert sum(map(len, split_rows)) < 12
    assert all(split_record.with_grad)


def test_a_micro_batch_of_only_inert_rows_keeps_one_row_in_the_graph() -> None:
    engine = FSDPEngine.from_config(engine_config())
    batch = _batch()
    batch[ADVANTAGES].zero_()
    batch[INERT_ROWS] = _zero_advantage(batch)
    loss = NormalizedLoss(ppo_loss_fn, "token-mean")
    gradients = engine.compute_gradients(batch, loss, ForwardSpec())
    assert gradients and all(float(g.abs().max()) == 0.0 for g in gradients.values())
    result = engine.train_step(batch, loss, ForwardSpec())
    assert not result.skipped and result.loss == 0.0


def test_inert_rows_must_be_a_bool_per_row() -> None:
    engine = FSDPEngine.from_config(engine_config())
    batch = _batch()
    batch[INERT_ROWS] = batch[ADVANTAGES] == 0  # (B, T), not one flag per row
    with pytest.raises(BatchError, match=r"the batch's 'inert_rows' must be a \(\d+,\) bool tensor"):
        engine.train_step(batch, NormalizedLoss(ppo_loss_fn, "token-mean"), ForwardSpec())


def test_length_groups_sort_rows_into_groups_of_similar_length() -> None:
    lengths = [40, 3, 100, 5, 4, 41, 90, 60, 3, 4, 5, 6]
    groups = inert_module.length_groups(lengths)
    assert sorted(index for group in groups for index in group) == list(range(len(lengths)))
    sizes = [[lengths[index] for index in group] for group in groups]
    # Ascending; a group takes MIN_LENGTH_GROUP_ROWS (8) rows first, then rows up to 1.5x its shortest.
    assert sizes == [[3, 3, 4, 4, 5, 5, 6, 40], [41, 60, 90, 100]]
    lengths = [20] * 8 + [3] * 8 + [50, 4, 4]
    sizes = [[lengths[index] for index in group] for group in inert_module.length_groups(lengths)]
    assert sizes == [[3] * 8 + [4, 4], [20] * 8, [50]]
    assert inert_module.length_groups([]) == []


def _on_policy_run(inert_outputs: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, dict, list, ForwardOutput]:
    """compute_gradients then train_step of an on-policy PPO objective (no `old_log_probs`: its ratio is 1) on a fresh
    engine, the zero-advantage rows marked inert; the rows of every forward run without autograd."""
    engine = FSDPEngine.from_config(engine_config())
    batch = {name: value for name, value in _batch().items() if name != OLD_LOG_PROBS}
    batch[INERT_ROWS] = _zero_advantage(batch)
    frozen: list[int] = []

    def counting(network, micro_batch, spec, **kwargs):
        if not torch.is_grad_enabled():
            frozen.extend(micro_batch["row"].tolist())
        return forward_micro_batch(network, micro_batch, spec, **kwargs)

    monkeypatch.setattr(inert_module, "forward_micro_batch", counting)
    monkeypatch.setattr(step_module, "forward_micro_batch", counting)
    batch["row"] = torch.arange(6)
    objective = PolicyObjective("ppo")
    spec = ForwardSpec(entropy=True, inert_outputs=inert_outputs)
    gradients = engine.compute_gradients(batch, objective, spec)
    result = engine.train_step(
        batch, objective, ForwardSpec(entropy=True, return_outputs=True, inert_outputs=inert_outputs)
    )
    assert result.outputs is not None
    return gradients, {"loss": result.loss, "norm": result.grad_norm, **result.metrics}, frozen, result.outputs


def test_inert_rows_without_outputs_run_no_forward_and_keep_an_on_policy_step(monkeypatch: pytest.MonkeyPatch) -> None:
    assert FSDPEngine.from_config(engine_config()).splits_inert_rows  # one process: no collective in a forward
    kept_grads, kept, kept_frozen, kept_outputs = _on_policy_run(True, monkeypatch)
    skip_grads, skipped, skip_frozen, skip_outputs = _on_policy_run(False, monkeypatch)
    # A zero-advantage row alone in its micro-batch keeps the graph (and its outputs); the others run apart or not.
    skipped_rows = sorted(set(kept_frozen))
    assert skipped_rows and set(skipped_rows) < set(ZERO_ROWS) and skip_frozen == []
    for name, grad in kept_grads.items():
        assert grad.abs().max() > 0, name
        torch.testing.assert_close(skip_grads[name], grad, atol=0, rtol=0, msg=name)
    # The loss and its metrics read the inert rows only through a ratio that is 1 whatever their log-probs.
    assert skipped.keys() == kept.keys() and {"actor/pg_clipfrac", "actor/ppo_kl"} <= kept.keys()
    for name, value in kept.items():
        assert skipped[name] == pytest.approx(value, rel=1e-6, abs=1e-9), name
    live = [row for row in range(6) if row not in skipped_rows]
    for kept_field, skip_field in zip(kept_outputs[:2], skip_outputs[:2], strict=True):
        assert kept_field is not None and skip_field is not None
        torch.testing.assert_close(skip_field[live], kept_field[live], atol=0, rtol=0)
        assert float(kept_field[skipped_rows].abs().sum()) > 0
        assert float(skip_field[skipped_rows].abs().sum()) == 0.0
