"""Under torchrun, a node that raises on one rank stops every rank at once, each naming the failed rank, its node
and its exception: two processes over gloo (`env://`, as torchrun sets it up), each an `SPMDDriver` over a
`LocalWorker`; rank 1's `score` node raises at step 1 while rank 0 waits for it in a collective of its `reduce`
node. Without the failure exchange rank 0 ends with gloo's "Connection closed by peer", naming nothing.

Each rank also imports what a torchrun rank runs (`rl_runtime.trainer`), and reports whether Ray got imported: it
must not (Ray is the Ray launcher's, imported lazily)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from rl_runtime.planning._rendezvous import free_port

GROUP_TIMEOUT_S = 300
"""The collectives' timeout: the ranks must stop long before it."""
PROMPT_S = 60.0
"""How long after the failure every rank must have stopped (seconds of process exit and a loaded machine)."""

_RANK = textwrap.dedent(
    """
    import json, sys, time
    from datetime import timedelta
    import torch, torch.distributed as dist
    from rl_core.graph import Node, TaskGraph
    from rl_runtime.planning import SchedulerConfig, TaskScheduler
    from rl_runtime.workers import LocalWorker, SPMDDriver, StepData, bind_operations, plan_routes, register_operation
    from rl_runtime.trainer._spmd_slots import SPMDSlots  # the torchrun launcher's modules, to check for Ray below

    @register_operation("spmd_test_score")
    def score(ctx, inputs):
        if ctx.rank == 1 and ctx.step == 1:
            raise ValueError("no reward for step 1")
        return StepData(metrics={"test/score": 1.0})

    @register_operation("spmd_test_reduce")
    def reduce(ctx, inputs):  # a collective inside a node, as an FSDP update has
        total = torch.ones(1)
        dist.all_reduce(total)
        return StepData(metrics={"test/sum": float(total)})

    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=%(timeout)d))
    graph = TaskGraph(
        "g", [Node("score", "spmd_test_score"), Node("reduce", "spmd_test_reduce", dependencies=("score",))]
    )
    placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=2)).schedule(graph)
    rank = dist.get_rank()
    assignment = placement.worker(rank)
    operations = {assignment.graph[n].operation: fn for n, fn in bind_operations(assignment.graph).items()}
    driver = SPMDDriver(LocalWorker(assignment, plan_routes(placement, rank), None, None, operations))
    first = driver.run_step(0).metrics["test/sum"]
    start = time.monotonic()
    try:
        driver.run_step(1)
    except Exception as error:
        ray = sorted(name for name in sys.modules if name == "ray" or name.startswith("ray."))
        report = {"first_sum": first, "type": type(error).__name__, "message": str(error), "ray": ray}
        print(json.dumps({**report, "seconds": time.monotonic() - start}), flush=True)
        sys.exit(2)
    """
)


def test_a_rank_whose_node_raises_stops_every_rank_naming_it(tmp_path: Path) -> None:
    script = tmp_path / "rank.py"
    script.write_text(_RANK % {"timeout": GROUP_TIMEOUT_S})
    base = {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    start = time.monotonic()
    ranks = [
        subprocess.Popen(
            [sys.executable, str(script)],
            env={**os.environ, **base, "RANK": str(rank), "LOCAL_RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    outputs = [process.communicate(timeout=GROUP_TIMEOUT_S) for process in ranks]
    assert time.monotonic() - start < GROUP_TIMEOUT_S
    reports = []
    for process, (out, err) in zip(ranks, outputs, strict=True):
        assert process.returncode == 2, err[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert [report["first_sum"] for report in reports] == [2.0, 2.0]  # step 0 ran on both
    assert [report["ray"] for report in reports] == [[], []]  # a torchrun rank runs without Ray
    failed, stopped = reports[1], reports[0]
    # the failed rank raises its own error; the other one the failed rank's report, not gloo's broken connection
    assert (
        failed["type"] == "NodeExecutionError" and "node 'score' failed on worker rank 1 at step 1" in failed["message"]
    )
    assert stopped["type"] == "RankFailedError", stopped
    assert stopped["message"].startswith("rank 1 of 2 (host ")
    assert (
        "failed in node 'score' at step 1: ValueError: no reward for step 1; rank 0 stopped with it"
        in (stopped["message"])
    )
    assert stopped["seconds"] < PROMPT_S
