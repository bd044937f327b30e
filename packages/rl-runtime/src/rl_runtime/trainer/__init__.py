"""The training loop: a `Trainer` that plans a RunConfig onto Ray DAG workers and runs, validates, checkpoints
and resumes it.

    result = Trainer(load_config(RunConfig, "grpo.yaml"), MyTaskFactory()).fit()

Each worker builds its engines from the config (`RunResourcesFactory`: FSDP2 actor/critic/reference over
gloo or NCCL, a rollout engine kept in sync with the actor), reads its own shard of the prompts and runs the
pipeline's node operations (`rl_runtime.nodes`); the driver only sends step numbers and receives metrics.
`placement.colocate=true` runs the whole pipeline on every slot; `false` splits it into a rollout and a training
sub-graph on slots of their own (`plan_placement`, `split_pipeline` over rl-core's `split_graph`), each slot
building only its sub-graph's engines, with the actor's updates broadcast to the rollout slots (`WeightSender`,
`WeightReceiver`). Checkpoints under `<output_dir>/checkpoints/step_N` are committed atomically with a manifest
of every file's CRC-32; `trainer.resume: auto` continues from the newest that verifies. One run at a time holds
`output_dir` (`RunLock`); SIGINT/SIGTERM stop a run after a saved step (`TrainingInterrupted`).

Launched by torchrun (`trainer.launcher`, `resolve_launch`), every process is one slot instead: the same worker
code runs in the rank itself and the ranks meet over torch.distributed, without Ray; rank 0 writes the run folder.
"""

from rl_runtime.trainer._checkpoints import read_state, verify_checkpoint
from rl_runtime.trainer._engines import build_actor
from rl_runtime.trainer._errors import CheckpointStateError, TrainerError, TrainingInterrupted
from rl_runtime.trainer._launch import Launch, launch_from_env, resolve_launch, spmd_barrier
from rl_runtime.trainer._lock import RunLock, RunLockedError
from rl_runtime.trainer._loop import Trainer, TrainResult
from rl_runtime.trainer._manifest import CheckpointCorruptError
from rl_runtime.trainer._worker_state import ExtrasFactory

__all__ = [
    "CheckpointCorruptError",
    "CheckpointStateError",
    "ExtrasFactory",
    "Launch",
    "RunLock",
    "RunLockedError",
    "TrainResult",
    "Trainer",
    "TrainerError",
    "TrainingInterrupted",
    "build_actor",
    "launch_from_env",
    "read_state",
    "resolve_launch",
    "spmd_barrier",
    "verify_checkpoint",
]
