"""The body of each rank of the two-process SFT test; a module of its own so spawned processes can import it."""

from __future__ import annotations

import os
from typing import Any

import torch.distributed as dist

from rl_recipes.sft import SFTConfig, SFTError, run_sft


def rank_main(rank: int, world: int, port: int, runs: list[tuple[str, int]], queue: Any, tiny: dict[str, Any]) -> None:
    """Join the gloo group, then run `run_sft` once per (output folder, batch size) of `runs`, in order, putting
    (rank, run index, status, losses or message, held-out exact match) on `queue` for each."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for index, (folder, batch_size) in enumerate(runs):
            try:
                result = run_sft(SFTConfig(output_dir=folder, **{**tiny, "steps": 3, "batch_size": batch_size}))
                queue.put((rank, index, "ok", result.losses, result.heldout_exact_match))
            except SFTError as exc:
                queue.put((rank, index, "error", str(exc), None))
            except BaseException as exc:  # anything else must reach the test as a failure, not a silent queue timeout
                queue.put((rank, index, "crashed", f"{type(exc).__name__}: {exc}", None))
                raise
    finally:
        dist.destroy_process_group()
