"""The weight-update group: a broadcast into another process, and every failure bounded by its timeout."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
import torch
import torch.distributed as dist

from rl_engines.rollout import EngineStateError, EngineTimeoutError, WeightGroup, WeightGroupSpec, weights_checksum
from rl_engines.sync import free_port

_CHILD = """
import sys, torch
from rl_engines.rollout import WeightGroup, WeightGroupSpec, weights_checksum
group = WeightGroup(WeightGroupSpec("127.0.0.1", int(sys.argv[1]), 1, 2, timeout_s=60.0), 1)
received = []
for name, n in (("a", 6), ("b", 4)):
    tensor = torch.empty(n)
    group.broadcast(tensor, src=0)
    received.append((name, tensor))
group.close()
print(weights_checksum(received))
"""


@pytest.mark.slow
def test_broadcast_reaches_another_process() -> None:
    port = free_port()
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(port)], stdout=subprocess.PIPE, text=True)
    group = WeightGroup(WeightGroupSpec("127.0.0.1", port, 1, 2, timeout_s=60.0), 0)
    sent = [("a", torch.arange(6.0)), ("b", torch.ones(4))]
    for _, tensor in sent:
        group.broadcast(tensor, src=0)
    out, _ = child.communicate(timeout=120)
    group.close()
    assert child.returncode == 0
    assert out.strip().splitlines()[-1] == weights_checksum(sent)


def test_a_broadcast_nobody_receives_times_out() -> None:
    spec = WeightGroupSpec("127.0.0.1", free_port(), 1, 2, timeout_s=1.0)
    members: dict[int, WeightGroup] = {}
    threads = [threading.Thread(target=lambda r=r: members.__setitem__(r, WeightGroup(spec, r))) for r in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with pytest.raises(EngineTimeoutError, match=r"failed or took over 1\.0 s"):
        members[0].broadcast(torch.ones(3))
    for group in members.values():
        group.close()
    with pytest.raises(EngineStateError, match="is closed"):
        members[0].broadcast(torch.ones(3))


def test_joining_without_a_trainer_times_out() -> None:
    with pytest.raises(EngineTimeoutError, match="joining weight group 'weight_update_group'"):
        WeightGroup(WeightGroupSpec("127.0.0.1", free_port(), 1, 2, timeout_s=0.5), 1)


def test_rank_outside_the_group() -> None:
    with pytest.raises(EngineStateError, match="rank 2 is outside the weight group of size 2"):
        WeightGroup(WeightGroupSpec("127.0.0.1", free_port(), 1, 2), 2)


@pytest.mark.skipif(dist.is_nccl_available(), reason="checks the CPU-only message")
def test_nccl_needs_a_cuda_build() -> None:
    with pytest.raises(EngineStateError, match="needs a CUDA build of torch with NCCL"):
        WeightGroup(WeightGroupSpec("127.0.0.1", free_port(), 1, 2, backend="nccl", timeout_s=1.0), 0)
