"""Continuous generation on a rollout slot (`algorithm.async_generation=continuous`, max_staleness eta >= 1).

Instead of one batch per step, the rollout slot keeps its requests in flight in the engine across steps
(`engine.submit`: each joins the running decode batch as others finish, see HFEngine's continuous batching). Each
step tops the pool up to `POOL_STEPS` steps' worth of prompt groups and takes the slot's share of groups that
finished first, so a long response holds only its own group, which finishes in a later step. Requests still
running when the step's `receive_weights` loads new weights are parked, continue under the new weights and record
the version of every token (`pause("keep")`, partial rollouts): a sample's `policy_version` is its first token's,
`token_policy_version` each token's. At a checkpoint the pool is run to the end and its groups enter the staleness
buffer (`flush_into_buffer`), which the checkpoint saves: nothing is in flight in a checkpoint.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from rl_core.schema import POLICY_VERSION, RESPONSE_MASK, TOKEN_POLICY_VERSION
from rl_core.workflows import NO_VERSION
from rl_engines.rollout import GenerateOutput, InferenceEngine, SamplingParams
from rl_runtime.config import RunConfig
from rl_runtime.metrics._timer import timed
from rl_runtime.nodes._dynamic_sampling import informative_groups
from rl_runtime.nodes._generate import PromptRequests, next_prompts, prompt_requests, response_budget
from rl_runtime.nodes._resources import NodeResources
from rl_runtime.nodes._reward import score_batch
from rl_runtime.nodes._rollout_batch import build_rollout_batch
from rl_runtime.nodes._staleness_buffer import RolloutBuffer
from rl_runtime.nodes._task import PromptItem
from rl_runtime.workers import NodeContext, StepData, StepDataError, register_operation

logger = logging.getLogger(__name__)

CONTINUOUS_GENERATE_OPERATION = "generate_continuous"
"""What split placement runs instead of `generate` under `algorithm.async_generation=continuous`."""
POOL_STEPS = 2
"""Groups kept in flight or finished-and-waiting: this many steps' shares (one step's to take, one carried over)."""
FLUSH_NODE = "checkpoint flush"
"""How a flush names itself in a scoring error."""


def continuous_generation(config: RunConfig) -> bool:
    """Whether the rollout slots generate continuously (`algorithm.async_generation=continuous`, split placement)."""
    return config.algorithm.async_generation == "continuous" and not config.placement.colocate


def rollout_steps_ahead(config: RunConfig) -> int:
    """How many steps the rollout slots may run ahead of training: eta, or eta - 1 under continuous generation,
    whose groups carried into a later step use the last version of the bound."""
    return max(0, config.algorithm.max_staleness - int(continuous_generation(config)))


@dataclass
class _Group:
    """One prompt's `samples_per_prompt` requests in flight."""

    group_id: int
    prompt: PromptItem
    uids: list[int]
    futures: list[concurrent.futures.Future[GenerateOutput]]

    def done(self) -> bool:
        return all(future.done() for future in self.futures)


class GenerationPool:
    """A rollout slot's prompt groups in flight in its engine, across steps."""

    def __init__(self) -> None:
        self._groups: list[_Group] = []

    def __len__(self) -> int:
        """Groups submitted and not taken."""
        return len(self._groups)

    def submit(
        self,
        engine: InferenceEngine,
        items: list[PromptItem],
        samples_per_prompt: int,
        sampling: SamplingParams,
        *,
        seed_parts: tuple[int, ...],
        uid_of: tuple[int, int, int],
    ) -> None:
        """Submit `samples_per_prompt` requests per prompt of `items`, uids and seeds as `prompt_requests` gives."""
        groups = prompt_requests(items, samples_per_prompt, sampling, seed_parts=seed_parts, uid_of=uid_of)
        self.submit_groups(engine, groups)

    def submit_groups(self, engine: InferenceEngine, groups: list[PromptRequests]) -> None:
        """Submit every request of `groups`; each group is taken whole once all its requests are done."""
        for group in groups:
            futures = [engine.submit(request) for request in group.requests]
            self._groups.append(_Group(group.group, group.item, list(group.uids), futures))

    def take(self, groups: int, timeout_s: float) -> StepData:
        """The first `groups` groups to finish (waiting for them), in submission order; a StepDataError after
        `timeout_s`."""
        if groups > len(self._groups):
            raise StepDataError(f"the pool holds {len(self._groups)} groups, fewer than the {groups} a step takes")
        deadline = time.monotonic() + timeout_s
        while sum(group.done() for group in self._groups) < groups:
            pending = [future for group in self._groups for future in group.futures if not future.done()]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StepDataError(
                    f"continuous generation: fewer than {groups} prompt groups finished in {timeout_s:g}s "
                    "(trainer.step_timeout_s); raise it or lower data.max_response_length"
                )
            concurrent.futures.wait(pending, timeout=remaining, return_when=concurrent.futures.FIRST_COMPLETED)
        finished = [group for group in self._groups if group.done()][:groups]
        taken = {id(group) for group in finished}
        self._groups = [group for group in self._groups if id(group) not in taken]
        return _batch(finished)

    def flush(self, timeout_s: float) -> StepData | None:
        """Every group, waiting for all to finish; None when the pool is empty."""
        if not self._groups:
            return None
        return self.take(len(self._groups), timeout_s)


def _first_version(output: GenerateOutput) -> int:
    return output.version_spans[0].version if output.version_spans else output.weight_version


def _batch(groups: list[_Group]) -> StepData:
    """The finished `groups` as a rollout batch, with each sample's first-token version and each token's version."""
    prompts, outputs, uids, group_ids = [], [], [], []
    for group in groups:
        for uid, future in zip(group.uids, group.futures, strict=True):
            prompts.append(group.prompt)
            outputs.append(future.result())
            uids.append(uid)
            group_ids.append(group.group_id)
    data = build_rollout_batch(prompts, outputs, uids, group_ids, 0)
    response = data.batch[RESPONSE_MASK].bool()
    token_versions = torch.full(response.shape, NO_VERSION, dtype=torch.int64)
    token_versions[response] = torch.tensor(
        [version for output in outputs for version in output.versions], dtype=torch.int64
    )
    batch = dict(data.batch)
    batch[POLICY_VERSION] = torch.tensor([_first_version(output) for output in outputs], dtype=torch.int64)
    batch[TOKEN_POLICY_VERSION] = token_versions
    return StepData(batch, data.extras)


def continuous_rollouts(res: NodeResources, step: int, rank: int) -> StepData:
    """This slot's share of the step from its GenerationPool: top it up to `POOL_STEPS` shares (new draws of the
    loader, their prompts from the worker's `prompt_table`, sampled with the run's settings), then take the share of
    groups that finished first."""
    config, engine = res.config, res.rollout
    if engine is None or res.prompts is None:
        raise StepDataError("continuous generation runs on the rollout slots, which hold the engine and the prompts")
    if res.generation_pool is None:
        res.generation_pool = GenerationPool()
    pool = res.generation_pool
    share = res.plan.prompts_per_rollout_rank
    sampling = SamplingParams(
        max_new_tokens=response_budget(config),
        temperature=config.rollout.temperature,
        top_p=config.rollout.top_p,
        top_k=config.rollout.top_k,
    )
    draw = 0
    while len(pool) < POOL_STEPS * share:
        pool.submit(
            engine,
            next_prompts(res),
            config.batch.samples_per_prompt,
            sampling,
            seed_parts=(config.trainer.seed, step, rank, draw),
            uid_of=(step, rank, draw),
        )
        draw += 1
    return pool.take(share, config.trainer.step_timeout_s)


def flush_into_buffer(res: NodeResources) -> int:
    """Run the slot's pool to the end and put its groups, scored (and filtered under dynamic sampling), into the
    staleness buffer, so a checkpoint holds them: the samples flushed."""
    pool = res.generation_pool
    if pool is None or len(pool) == 0:
        return 0
    data = pool.flush(res.config.trainer.step_timeout_s)
    assert data is not None
    scored = score_batch(res, data, FLUSH_NODE)
    settings = res.config.algorithm.dynamic_sampling
    if settings is not None:
        scored = informative_groups(scored, settings.epsilon)
    if res.staleness_buffer is None:
        res.staleness_buffer = RolloutBuffer(res.config.algorithm.max_staleness)
    res.staleness_buffer.put(StepData(scored.batch, scored.extras))
    logger.info("flushed %d in-flight samples into the staleness buffer", data.num_samples)
    return data.num_samples


@register_operation(CONTINUOUS_GENERATE_OPERATION)
def generate_continuous(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """`generate` under continuous generation: this slot's share of the groups that finished first
    (`continuous_rollouts`). Reports `rollout/policy_version` (the version the engine holds as the step starts)
    and `rollout/in_flight_groups` (groups left in the pool: generating, or finished and waiting for a later step)."""
    res = ctx.resources
    metrics: dict[str, float] = {"rollout/policy_version": float(res.policy_version)}
    with timed("gen", metrics):
        data = continuous_rollouts(res, ctx.step, ctx.dp.rank)
    metrics["rollout/in_flight_groups"] = float(len(res.generation_pool or ()))
    return StepData(data.batch, data.extras, metrics)
