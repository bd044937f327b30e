"""The `generate` operation: draw this rank's prompts, sample each `samples_per_prompt` times, build the batch.

The prompts were encoded once, when the worker was built (`rl_runtime.nodes._prompt_table`); a step looks them up
by the loader's dataset indices."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rl_core.workflows import SingleTurnWorkflow
from rl_engines.rollout import GenerateRequest, InferenceEngine, SamplingParams
from rl_runtime.config import RunConfig
from rl_runtime.metrics._timer import timed
from rl_runtime.nodes._resources import NodeResources
from rl_runtime.nodes._rollout_batch import build_rollout_batch
from rl_runtime.nodes._seeds import sample_seed, sample_uid
from rl_runtime.nodes._task import PromptItem
from rl_runtime.nodes._workflow_rollout import run_workflow
from rl_runtime.workers import NodeContext, StepData, StepDataError, register_operation

SLEEP_LEVEL = 1
"""Colocated rollout engines offload their weights while training runs (level 2 would discard them)."""


def response_budget(config: RunConfig) -> int:
    """Tokens a response may have: `rollout.max_new_tokens`, else `data.max_response_length`."""
    return config.rollout.max_new_tokens or config.data.max_response_length


def next_prompts(res: NodeResources) -> list[PromptItem]:
    """This rank's next prompts: the loader's next rows (`LoaderBatch.indices`), their `PromptItem`s taken from the
    table the worker encoded when it was built (`NodeResources.prompt_table`); the task is not called in the step."""
    if res.prompts is None or res.prompt_table is None:
        raise StepDataError(
            "this worker holds no prompt loader or no prompt table: the trainer's resources factory builds both on "
            "the rollout slots; a NodeResources built by hand needs "
            "prompt_table=rl_runtime.nodes.PromptTable.encode(task, loader.source, data.max_prompt_length)"
        )
    return res.prompt_table.items(next(res.prompts).indices)


@dataclass(frozen=True)
class PromptRequests:
    """One prompt's group of requests: the prompt, its group id, and its responses' uids and requests."""

    item: PromptItem
    group: int
    uids: tuple[int, ...]
    requests: tuple[GenerateRequest, ...]


def prompt_requests(
    items: Sequence[PromptItem],
    samples_per_prompt: int,
    sampling: SamplingParams,
    *,
    seed_parts: tuple[int, ...],
    uid_of: tuple[int, int, int],
) -> list[PromptRequests]:
    """`samples_per_prompt` requests for each prompt, each with its own seed from `seed_parts` and its index.

    `uid_of` is (step, rank, draw): sample `j * n + k` (k-th response to prompt j) gets uid and rid
    `sample_uid(step, rank, draw, j * n + k)` and group id `sample_uid(step, rank, draw, j)`.
    """
    step, rank, draw = uid_of
    groups = []
    for j, item in enumerate(items):
        uids, requests = [], []
        for k in range(samples_per_prompt):
            index = j * samples_per_prompt + k
            uid = sample_uid(step, rank, draw, index)
            params = SamplingParams(
                max_new_tokens=sampling.max_new_tokens,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k,
                seed=sample_seed(*seed_parts, index),
            )
            uids.append(uid)
            requests.append(GenerateRequest(str(uid), item.prompt_ids, params))
        groups.append(PromptRequests(item, sample_uid(step, rank, draw, j), tuple(uids), tuple(requests)))
    return groups


def generate_groups(engine: InferenceEngine, groups: Sequence[PromptRequests], policy_version: int) -> StepData:
    """The rollout batch of `groups`' requests, generated in one engine call."""
    outputs = engine.generate([request for group in groups for request in group.requests])
    prompts = [group.item for group in groups for _ in group.uids]
    uids = [uid for group in groups for uid in group.uids]
    group_ids = [group.group for group in groups for _ in group.uids]
    return build_rollout_batch(prompts, outputs, uids, group_ids, policy_version)


def sample_prompts(
    engine: InferenceEngine,
    items: Sequence[PromptItem],
    samples_per_prompt: int,
    sampling: SamplingParams,
    *,
    seed_parts: tuple[int, ...],
    uid_of: tuple[int, int, int],
    policy_version: int,
) -> StepData:
    """`samples_per_prompt` responses to each prompt, uids and seeds as `prompt_requests` gives them."""
    groups = prompt_requests(items, samples_per_prompt, sampling, seed_parts=seed_parts, uid_of=uid_of)
    return generate_groups(engine, groups, policy_version)


def draw_rollouts(res: NodeResources, step: int, rank: int, draw: int) -> StepData:
    """One draw of this rank's next prompts from its loader, sampled with the run's rollout settings.

    The single-turn workflow (the default `rollout.workflow`) runs as one batched engine call (`sample_prompts`);
    any other workflow runs its episodes concurrently (`run_workflow`), one batch row per trajectory."""
    config = res.config
    if res.rollout is None or res.prompts is None:
        raise StepDataError(
            "this worker holds no rollout engine or prompt loader: under placement.colocate=false only the rollout "
            "slots sample; keep generate and dynamic_sampling in the rollout part of the pipeline"
        )
    items = next_prompts(res)
    sampling = SamplingParams(
        max_new_tokens=response_budget(config),
        temperature=config.rollout.temperature,
        top_p=config.rollout.top_p,
        top_k=config.rollout.top_k,
    )
    workflow = res.workflow
    if workflow is not None and not isinstance(workflow, SingleTurnWorkflow):
        return run_workflow(
            workflow,
            res.rollout,
            items,
            config.batch.samples_per_prompt,
            sampling,
            seed_parts=(config.trainer.seed, step, rank, draw),
            uid_of=(step, rank, draw),
            token_budget=config.data.max_response_length,
            timeout_s=config.rollout.episode_timeout_s,
        )
    return sample_prompts(
        res.rollout,
        items,
        config.batch.samples_per_prompt,
        sampling,
        seed_parts=(config.trainer.seed, step, rank, draw),
        uid_of=(step, rank, draw),
        policy_version=res.policy_version,
    )


def put_rollout_to_sleep(res: NodeResources) -> None:
    """Colocated: free the rollout engine's memory for training (the weight sync wakes it for the next update)."""
    if res.config.placement.colocate and res.rollout is not None and "sleep" in res.rollout.capabilities:
        res.rollout.sleep(SLEEP_LEVEL)


@register_operation("generate")
def generate(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """This rank's share of the step's prompts, each sampled `batch.samples_per_prompt` times.

    Reports `rollout/policy_version`: the weight version the samples came from (the number of actor updates the
    rollout engine has received; on-policy, equal to the steps done)."""
    res = ctx.resources
    metrics: dict[str, float] = {"rollout/policy_version": float(res.policy_version)}
    with timed("gen", metrics):
        data = draw_rollouts(res, ctx.step, ctx.dp.rank, draw=0)
    put_rollout_to_sleep(res)
    return StepData(data.batch, data.extras, {**data.metrics, **metrics})
