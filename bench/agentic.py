"""Agentic rollouts: episodes/s of N concurrent multi-turn episodes on one engine vs the same episodes one after
another, in the same run (N = 1, 8, 32).

Each episode is 3 model turns of 16 sampled tokens with an 8-token tool answer between turns, after a 2 ms tool call
(`asyncio.sleep`, standing in for a tool's latency). Episodes run through the runtime's engine adapter
(`rl_runtime.nodes._episode_engine.EngineEpisodes`) on an `HFEngine` over a tiny fp32 Qwen2 on CPU: concurrently
(`rl_core.workflows.arun_episodes`, so the turns waiting in one pass of the event loop share one batched `generate`),
and sequentially (each episode awaited before the next starts, so every call is a batch of one). Sides alternate
(sequential, concurrent, ...), medians over `--repeats`.

Last line: RESULT agentic episodes_per_s=<concurrent, N=32> ratio=<concurrent/sequential at 32> goal=4 met|missed
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from rl_core.workflows import (
    EpisodeEngine,
    EpisodeInput,
    RolloutWorkflow,
    Trajectory,
    TrajectoryBuilder,
    arun_episodes,
    episode_input,
)
from rl_engines.rollout import HFEngine, HFEngineConfig, SamplingParams
from rl_runtime.nodes._episode_engine import EngineEpisodes

TURNS, TOKENS_PER_TURN, TOOL_TOKENS, TOOL_LATENCY_S = 3, 16, 8, 0.002
GOAL_RATIO = 4.0
SIZES = (1, 8, 32)


class ToolTurnsWorkflow:
    """`TURNS` model turns; between them a simulated tool call answering `TOOL_TOKENS` tokens."""

    async def arun_episode(self, engine: EpisodeEngine, data: EpisodeInput) -> Trajectory | None:
        builder = TrajectoryBuilder(data.prompt_ids)
        for turn in range(TURNS):
            builder.add_completion(await engine.agenerate(builder.token_ids, max_new_tokens=TOKENS_PER_TURN))
            if turn < TURNS - 1:
                await asyncio.sleep(TOOL_LATENCY_S)
                builder.add_observation([7 + (data.index + i) % 50 for i in range(TOOL_TOKENS)])
        return builder.build()


def build_engine() -> HFEngine:
    config = Qwen2Config(
        vocab_size=512, hidden_size=128, intermediate_size=344, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=False, eos_token_id=None,
        pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    return HFEngine(Qwen2ForCausalLM(config), HFEngineConfig(seed=0))


def _shared(engine: HFEngine) -> EngineEpisodes:
    sampling = SamplingParams(max_new_tokens=TOKENS_PER_TURN, temperature=1.0)
    budget = TURNS * TOKENS_PER_TURN + (TURNS - 1) * TOOL_TOKENS
    return EngineEpisodes(engine, sampling, seed_parts=(0,), rid_prefix="bench", token_budget=budget)


def _inputs(n: int) -> list[EpisodeInput]:
    return [episode_input([1 + (i * 37 + j) % 500 for j in range(24)], {}, i) for i in range(n)]


def concurrent(engine: HFEngine, workflow: RolloutWorkflow, inputs: Sequence[EpisodeInput]) -> float:
    """Seconds for all episodes at once."""
    shared = _shared(engine)
    start = time.perf_counter()
    results = asyncio.run(arun_episodes(workflow, shared.view, inputs))
    elapsed = time.perf_counter() - start
    assert all(r.outcome == "accepted" for r in results), [r.error for r in results if r.error]
    return elapsed


def sequential(engine: HFEngine, workflow: RolloutWorkflow, inputs: Sequence[EpisodeInput]) -> float:
    """Seconds for the episodes one after another."""
    shared = _shared(engine)

    async def run() -> None:
        for data in inputs:
            assert await workflow.arun_episode(shared.view(data.index), data) is not None

    start = time.perf_counter()
    asyncio.run(run())
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds per size (median reported)")
    args = parser.parse_args()
    engine, workflow = build_engine(), ToolTurnsWorkflow()
    concurrent(engine, workflow, _inputs(2))  # warm-up
    ratio = per_s = 0.0
    print(f"{'N':>4} {'sequential ep/s':>16} {'concurrent ep/s':>16} {'ratio':>7}")
    for n in SIZES:
        inputs = _inputs(n)
        seq, con = [], []
        for _ in range(args.repeats):
            seq.append(sequential(engine, workflow, inputs))
            con.append(concurrent(engine, workflow, inputs))
        seq_rate, con_rate = n / statistics.median(seq), n / statistics.median(con)
        ratio, per_s = con_rate / seq_rate, con_rate
        print(f"{n:>4} {seq_rate:>16.2f} {con_rate:>16.2f} {ratio:>6.2f}x")
    verdict = "met" if ratio >= GOAL_RATIO else "missed"
    print(f"RESULT agentic episodes_per_s={per_s:.2f} ratio={ratio:.2f} goal={GOAL_RATIO:g} {verdict}")


if __name__ == "__main__":
    main()
