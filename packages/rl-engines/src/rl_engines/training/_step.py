"""One optimizer step over the engine's micro-batches, with the loss normalised over the global batch.

Every micro-batch's loss is already divided by the step's global counts (`LossNormalizer`, summed over
all micro-batches on all ranks), so the gradients of the micro-batches add up, across accumulation and
across ranks, to the gradient of the whole batch's loss. FSDP2 therefore *sums* gradients over ranks
(its divide factor is set to 1 in `_fsdp.shard`), as do the replicas of `data_parallel="ddp"` after the
backward (`_replicate.all_reduce_gradients`); with dp = 2 and 2 micro-batches each the result equals one
process on the whole batch.

A step whose loss or gradient norm is not finite on any rank is skipped on every rank: the gradients
are dropped, the optimizer is not applied, and the result says so.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import torch

from rl_core.losses import LossNormalizer
from rl_engines.training._deferred_norm import DeferredCounts
from rl_engines.training._errors import BatchError
from rl_engines.training._forward import forward_micro_batch
from rl_engines.training._fsdp import ProcessLayout, all_reduce_sum, collective_device, full_tensor
from rl_engines.training._inert_rows import forward_without_inert_grad, inert_mask
from rl_engines.training._micro_batches import OutputRecorder, select_rows
from rl_engines.training._packing import InputLayout
from rl_engines.training._replicate import all_reduce_gradients
from rl_engines.training._types import Batch, ForwardSpec, LossFn, RescalableLoss, StepResult

logger = logging.getLogger(__name__)


def backward_micro_batches(
    network: torch.nn.Module,
    batch: Batch,
    plan: Sequence[Sequence[int]],
    normalizer: LossNormalizer,
    loss_fn: LossFn,
    spec: ForwardSpec,
    *,
    device: torch.device,
    input_layout: InputLayout,
    chunk_size: int,
    skip_inert: bool = False,
    record: OutputRecorder | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Forward and backward every micro-batch, accumulating gradients; return this rank's summed loss and
    its metrics averaged over micro-batches. With `skip_inert`, the rows the batch marks `inert_rows` run their forward
    without autograd (`_inert_rows`); `record` keeps each micro-batch's detached outputs at its rows."""
    local_loss = torch.zeros((), dtype=torch.float64, device=device)
    metric_sums: dict[str, torch.Tensor] = {}
    for rows in plan:
        micro_batch = select_rows(batch, rows, device)
        inert = inert_mask(micro_batch) if skip_inert else None
        if inert is None:
            outputs = forward_micro_batch(network, micro_batch, spec, input_layout=input_layout, chunk_size=chunk_size)
        else:
            outputs = forward_without_inert_grad(
                network, micro_batch, inert, spec, input_layout=input_layout, chunk_size=chunk_size
            )
        if record is not None:
            record.add(rows, outputs)
        loss, metrics = loss_fn(outputs, micro_batch, normalizer)
        if loss.dim() != 0:
            raise BatchError(f"loss_fn must return a 0-dim loss, got shape {tuple(loss.shape)}")
        loss.backward()
        local_loss += loss.detach().double()
        for name, value in metrics.items():
            metric_sums[name] = metric_sums.get(name, 0.0) + value.detach().double()
    count = max(1, len(plan))
    return local_loss, {name: float(total) / count for name, total in metric_sums.items()}


def _grad_norm(parameters: list[torch.nn.Parameter], max_grad_norm: float | None) -> float:
    """The global gradient norm (over every rank's shards); clips in place when finite and a limit is set."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return 0.0
    total = torch.nn.utils.get_total_norm(grads, norm_type=2.0, error_if_nonfinite=False)
    norm = float(full_tensor(total))
    if max_grad_norm is not None and math.isfinite(norm):
        torch.nn.utils.clip_grads_with_norm_(parameters, max_grad_norm, total)
    return norm


def apply_gradients(
    parameters: list[torch.nn.Parameter], optimizer: torch.optim.Optimizer, loss: float, max_grad_norm: float | None
) -> tuple[float, bool]:
    """Clip and apply the summed gradients unless the global `loss` or the gradient norm is not finite.

    Returns:
        (gradient norm before clipping, skipped).
    """
    norm = _grad_norm(parameters, max_grad_norm)
    skipped = not (math.isfinite(loss) and math.isfinite(norm))
    if skipped:
        logger.warning("skipping the optimizer step: loss=%s, grad_norm=%s (not finite)", loss, norm)
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return norm, skipped


def _sum_gradients_and_loss(
    network: torch.nn.Module,
    local_loss: torch.Tensor,
    layout: ProcessLayout,
    deferred: DeferredCounts | None,
    loss_fn: LossFn,
) -> tuple[float, LossNormalizer | None]:
    """Sum the replicas' gradients (under ddp) and return the global loss; a NaN/inf on any rank reaches every rank
    through the loss. Under ddp the loss rides in the gradients' collective, so a step pays one round, not two; with
    `deferred` the normaliser's counts ride too, and the gradients and loss are rescaled to the global normaliser by
    the loss's own `rescale` (`loss_fn` is then a `RescalableLoss`; the normaliser is returned, None without
    `deferred`)."""
    if not layout.replicated:
        return float(all_reduce_sum(local_loss.to(collective_device(layout)), layout)), None
    parameters = list(network.parameters())
    if deferred is None:
        return float(all_reduce_gradients(parameters, riders=local_loss)), None
    assert isinstance(loss_fn, RescalableLoss)  # the engine defers only for one (`deferrable`)
    riders = torch.cat([local_loss.detach().double().view(1), deferred.riders.to(local_loss.device)])
    summed = all_reduce_gradients(parameters, riders=riders)
    assert summed is not None  # riders were given
    normalizer, scale = loss_fn.rescale(deferred.provisional, *deferred.counts(summed[1:]))
    if scale != 1.0:
        grads = [p.grad for p in parameters if p.grad is not None]
        if grads:
            # One fused kernel for all gradients; torch's stubs leave its _foreach ops out of the exports.
            torch._foreach_mul_(grads, scale)  # pyright: ignore[reportPrivateImportUsage]
    return float(summed[0]) * scale, normalizer


def train_step(
    network: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    plan: Sequence[Sequence[int]],
    normalizer: LossNormalizer,
    loss_fn: LossFn,
    spec: ForwardSpec,
    *,
    layout: ProcessLayout,
    input_layout: InputLayout,
    chunk_size: int,
    max_grad_norm: float | None,
    keep_gradients: bool = False,
    deferred: DeferredCounts | None = None,
    record: OutputRecorder | None = None,
) -> StepResult:
    """Accumulate the micro-batches' gradients and apply one optimizer step (see the module docstring).

    `keep_gradients` leaves the summed gradients in `.grad` and does not step (for checks against a reference).
    `deferred` (ddp only, `loss_fn` a `RescalableLoss`): `normalizer` is provisional and the global counts ride on the
    gradient all-reduce (`_deferred_norm`); the gradients are rescaled before clipping, so the clip sees today's
    gradient.
    `record` (`ForwardSpec.return_outputs`): the training forward's outputs come back in `StepResult.outputs`.
    """
    network.train()
    optimizer.zero_grad(set_to_none=True)
    local_loss, metrics = backward_micro_batches(
        network,
        batch,
        plan,
        normalizer,
        loss_fn,
        spec,
        device=layout.device,
        input_layout=input_layout,
        chunk_size=chunk_size,
        # An FSDP2 forward is a collective: every rank must run the same forwards (`_inert_rows`).
        skip_inert=not layout.sharded,
        record=record,
    )
    loss, global_normalizer = _sum_gradients_and_loss(network, local_loss, layout, deferred, loss_fn)
    if global_normalizer is not None:
        normalizer = global_normalizer
    lr = float(optimizer.param_groups[0]["lr"])
    outputs = None if record is None else record.merged()
    if keep_gradients:
        return StepResult(loss, math.nan, True, lr, len(plan), normalizer, metrics, outputs)
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    norm, skipped = apply_gradients(parameters, optimizer, loss, max_grad_norm)
    return StepResult(loss, norm, skipped, lr, len(plan), normalizer, metrics, outputs)
