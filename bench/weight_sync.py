"""Weight sync: seconds vs bytes per transport, fitted GB/s and fixed overhead, against this machine's memcpy.

Setup: a Qwen2-shaped model of ~1 GB fp32 (vocab 32000, hidden 1024, 12 layers; built in code, saved to a
temporary directory) is served by an `HFEngine` in a *separate process* (`rl_engines.testing.ProcessEngine`,
one per transport), as a rollout server would be. The trainer holds the same tensors and runs
`WeightSync.sync` (pause -> update -> flush -> set version -> resume; verification off, so only the transfer
is timed) for subsets of the tensors totalling about 0.1, 0.25, 0.5 and 1 GB, in 256 MiB buckets, over

    shared_memory  SharedMemoryTransport: one copy into a pooled shared buffer, lent to the engine, which
                   keeps it as its weights (no second copy); buffers the engine releases are reused
    broadcast      BroadcastTransport: a gloo group over 127.0.0.1
    disk           DiskTransport: safetensors files + index (fsync on), the engine reads them back

memcpy is `dst.copy_(src)` between two already-touched 256 MiB buffers (torch's threads), timed in the same
loop. After 3 warm-up syncs each (buffer pools and groups settle), every repeat runs every (size, transport)
pair and a memcpy, the transports in alternating order; medians over the repeats are fitted by least
squares `t = overhead + bytes / rate`. Goals (notes/performance.md B3, CPU): shared memory >= 0.5x memcpy
and fixed overhead <= 20 ms.

Last line: RESULT weight_sync shm_gbps=<x> ratio=<shm/memcpy> goal=0.5 met|missed
Run: python bench/weight_sync.py [--repeats 5] [--sizes-gb 0.1,0.25,0.5,1.0]   (~1.5-3 min on 2 cores)
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from rl_engines.rollout import HFEngineConfig
from rl_engines.sync import BroadcastTransport, DiskTransport, SharedMemoryTransport, WeightSync, WeightSyncConfig
from rl_engines.testing import ProcessEngine

BUCKET_BYTES = 256 * 2**20
MEMCPY_BYTES = 256 * 2**20
GOAL_RATIO = 0.5
WARMUP_SYNCS = 3
GOAL_OVERHEAD_S = 0.020
GB = 1e9


def build_model(directory: Path) -> dict[str, torch.Tensor]:
    """A ~1 GB fp32 Qwen2 saved to `directory`; returns its state dict (the trainer's tensors)."""
    config = Qwen2Config(
        vocab_size=32000, hidden_size=1024, intermediate_size=4096, num_hidden_layers=12, num_attention_heads=16,
        num_key_value_heads=4, max_position_embeddings=512, tie_word_embeddings=False,
    )  # fmt: skip
    with torch.device("meta"):
        model = Qwen2ForCausalLM(config)
    model = model.to_empty(device="cpu")
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.uniform_(-0.05, 0.05, generator=generator)
    model.save_pretrained(directory)
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def subsets(state: dict[str, torch.Tensor], sizes_gb: list[float]) -> list[list[tuple[str, torch.Tensor]]]:
    """For each size, the first tensors (in state-dict order) whose bytes reach it."""
    out = []
    for size in sizes_gb:
        chosen, total = [], 0
        for name, tensor in state.items():
            if total >= size * GB:
                break
            chosen.append((name, tensor))
            total += tensor.nbytes
        out.append(chosen)
    return out


def buckets(named: list[tuple[str, torch.Tensor]]) -> list[list[tuple[str, torch.Tensor]]]:
    out, bucket, size = [], [], 0
    for name, tensor in named:
        if bucket and size + tensor.nbytes > BUCKET_BYTES:
            out.append(bucket)
            bucket, size = [], 0
        bucket.append((name, tensor))
        size += tensor.nbytes
    return [*out, bucket] if bucket else out


def memcpy_seconds(src: torch.Tensor, dst: torch.Tensor) -> float:
    start = time.perf_counter()
    dst.copy_(src)
    return time.perf_counter() - start


def fit(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Least squares t = a + b * bytes -> (GB/s = 1 / b / GB, overhead a in s, R^2)."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    ss_tot = sum((y - my) ** 2 for y in ys) or 1e-30
    return 1.0 / slope / GB, intercept, 1 - ss_res / ss_tot


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes-gb", default="0.1,0.25,0.5,1.0")
    args = parser.parse_args()
    sizes = [float(s) for s in args.sizes_gb.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-weight-sync-") as tmp:
        state = build_model(Path(tmp) / "model")
        transports = {
            "shared_memory": SharedMemoryTransport(),
            "broadcast": BroadcastTransport(timeout_s=600),
            "disk": DiskTransport(Path(tmp) / "disk", keep_last=1),
        }
        # One engine process per transport, so each receiver stays in its own steady state (a broadcast,
        # for one, leaves the engine's weights in freshly allocated memory).
        engines = {
            name: ProcessEngine(HFEngineConfig(model_path=str(Path(tmp) / "model")), call_timeout_s=600)
            for name in transports
        }
        config = WeightSyncConfig(verify=False, timeout_s=600)
        syncs = {name: WeightSync([engines[name]], transport, config) for name, transport in transports.items()}
        payloads = subsets(state, sizes)
        nbytes = [sum(t.nbytes for _, t in named) for named in payloads]
        src, dst = torch.ones(MEMCPY_BYTES // 4), torch.zeros(MEMCPY_BYTES // 4)
        times: dict[tuple[str, int], list[float]] = {}
        memcpy: list[float] = []
        versions = itertools.count(1)  # every sync labels the weights with the next policy version
        for _ in range(WARMUP_SYNCS):  # allocate buffers, open groups, fault pages in
            for sync in syncs.values():
                sync.sync(buckets(payloads[-1]), next(versions))
        order = list(syncs)
        for repeat in range(args.repeats):
            for index, named in enumerate(payloads):
                memcpy.append(MEMCPY_BYTES / memcpy_seconds(src, dst) / GB)
                for name in order if repeat % 2 == 0 else order[::-1]:
                    start = time.perf_counter()
                    syncs[name].sync(buckets(named), next(versions))
                    times.setdefault((name, index), []).append(time.perf_counter() - start)
        for sync in syncs.values():
            sync.close()
        for engine in engines.values():
            engine.shutdown()
    memcpy_gbps = statistics.median(memcpy)
    print(f"memcpy (warm 256 MiB buffers, median of {len(memcpy)}): {memcpy_gbps:.2f} GB/s")
    print(f"{'transport':>14} " + " ".join(f"{b / GB:>8.3f}GB" for b in nbytes) + "     GB/s  overhead_ms    R2")
    fits = {}
    for name in syncs:
        medians = [statistics.median(times[(name, i)]) for i in range(len(nbytes))]
        fits[name] = fit(list(zip(nbytes, medians, strict=True)))
        rate, overhead, r2 = fits[name]
        cells = " ".join(f"{m:>9.3f}s" for m in medians)
        print(f"{name:>14} {cells} {rate:8.2f} {overhead * 1e3:12.1f} {r2:6.3f}")
    shm_rate, shm_overhead, _ = fits["shared_memory"]
    ratio = shm_rate / memcpy_gbps
    overhead_met = shm_overhead <= GOAL_OVERHEAD_S
    print(f"shared_memory fixed overhead {shm_overhead * 1e3:.1f} ms goal<=20 {'met' if overhead_met else 'missed'}")
    verdict = "met" if ratio >= GOAL_RATIO else "missed"
    print(f"RESULT weight_sync shm_gbps={shm_rate:.2f} ratio={ratio:.2f} goal={GOAL_RATIO} {verdict}")


if __name__ == "__main__":
    main()
