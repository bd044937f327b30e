"""The `dynamic_sampling` operation (DAPO): keep groups whose rewards vary, drawing more prompts until full."""

from __future__ import annotations

from collections.abc import Mapping

from rl_core.schema import GROUP_ID, TOKEN_LEVEL_SCORES
from rl_core.shaping import dynamic_sampling_mask
from rl_runtime.nodes._batching import require_fields, single_input
from rl_runtime.nodes._generate import draw_rollouts, put_rollout_to_sleep
from rl_runtime.nodes._resources import NodeResources
from rl_runtime.nodes._reward import score_batch
from rl_runtime.nodes._rollout_batch import concat_samples, select_samples
from rl_runtime.workers import NodeContext, StepData, StepDataError, register_operation

_NEEDS = (TOKEN_LEVEL_SCORES, GROUP_ID)


def informative_groups(data: StepData, epsilon: float) -> StepData:
    """The samples of `data` whose group's sequence scores vary by more than `epsilon` (population std)."""
    scores = data.batch[TOKEN_LEVEL_SCORES].sum(dim=-1)
    keep = dynamic_sampling_mask(scores, data.batch[GROUP_ID], epsilon=epsilon).keep
    return select_samples(data, keep.nonzero().flatten())


def first_groups(data: StepData, count: int) -> StepData:
    """The samples of the first `count` groups of `data`, in order of first appearance."""
    groups = data.batch[GROUP_ID].tolist()
    wanted = set(list(dict.fromkeys(groups))[:count])
    return select_samples(data, [row for row, group in enumerate(groups) if group in wanted])


def _num_groups(parts: list[StepData]) -> int:
    return sum(len(set(part.batch[GROUP_ID].tolist())) for part in parts)


def fill_informative(res: NodeResources, first: StepData, step: int, rank: int, node: str) -> tuple[StepData, int]:
    """This rank's `prompts_per_rollout_rank` informative groups, starting from the first draw's informative
    samples `first` and drawing more prompts while short; and the number of draws."""
    settings, rollout = res.config.algorithm.dynamic_sampling, res.rollout
    if settings is None:
        raise StepDataError(f"node {node!r} runs dynamic sampling but algorithm.dynamic_sampling is null; set it")
    target = res.plan.prompts_per_rollout_rank
    kept = [first]
    draws = 1
    while _num_groups(kept) < target:
        if draws >= settings.max_draws:
            raise StepDataError(
                f"node {node!r}, step {step}: only {_num_groups(kept)} of {target} prompt groups had varying rewards "
                f"after {draws} draws (algorithm.dynamic_sampling.max_draws={settings.max_draws}); raise max_draws, or "
                "check that the reward can tell responses apart (all-correct or all-wrong groups are dropped)"
            )
        # Without a rollout engine, draw_rollouts says so.
        if rollout is not None and "sleep" in rollout.capabilities and rollout.status().state == "asleep":
            rollout.wake_up()
        more = score_batch(res, draw_rollouts(res, step, rank, draw=draws), node)
        kept.append(informative_groups(more, settings.epsilon))
        draws += 1
    put_rollout_to_sleep(res)
    return first_groups(concat_samples([part for part in kept if part.num_samples]), target), draws


@register_operation("dynamic_sampling")
def dynamic_sampling(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """Keeps exactly this rank's share of prompt groups, all with varying rewards (needs dynamic_sampling config)."""
    res = ctx.resources
    data = single_input(ctx, inputs)
    require_fields(data, _NEEDS, ctx.node.id)
    if res.config.algorithm.dynamic_sampling is None:
        raise StepDataError(
            f"node {ctx.node.id!r} runs dynamic sampling but algorithm.dynamic_sampling is null; set it (e.g. "
            "{epsilon: 0.0, max_draws: 8}) or use a pipeline without dynamic sampling"
        )
    first = informative_groups(data, res.config.algorithm.dynamic_sampling.epsilon)
    kept, draws = fill_informative(res, first, ctx.step, ctx.dp.rank, ctx.node.id)
    metrics = {
        "dynamic_sampling/num_draws": float(draws),
        "dynamic_sampling/first_draw_kept_ratio": first.num_samples / data.num_samples,
    }
    return StepData(kept.batch, kept.extras, metrics)
