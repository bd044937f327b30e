"""The body of each rank of the two-process SFT test; a module of its own so spawned processes can import it."""

from __future__ import annotations

import os
from typing import Any

import torch.distributed as dist

from rl_recipes.sft import SFTConfig, SFTError, run_sft


def rank_main(rank: int, world: int, port: int, folder: str, batch_size: int, queue: Any, tiny: dict[str, Any]) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        result = run_sft(SFTConfig(output_dir=folder, **{**tiny, "steps": 3, "batch_size": batch_size}))
        queue.put((rank, "ok", result.losses, result.heldout_exact_match))
    except SFTError as exc:
        queue.put((rank, "error", str(exc), None))
    except BaseException as exc:  # anything else must reach the test as a failure, not a silent queue timeout
        queue.put((rank, "crashed", f"{type(exc).__name__}: {exc}", None))
        raise
    finally:
        dist.destroy_process_group()
