"""The training loop: a `Trainer` that plans a RunConfig onto Ray DAG workers and runs, validates, checkpoints
and resumes it.

    result = Trainer(load_config(RunConfig, "grpo.yaml"), MyTaskFactory()).fit()

Each worker builds its engines from the config (`RunResourcesFactory`: FSDP2 actor/critic/reference over
gloo or NCCL, a rollout engine kept in sync with the actor), reads its own shard of the prompts and runs the
pipeline's node operations (`rl_runtime.nodes`); the driver only sends step numbers and receives metrics.
`placement.colocate=true` runs the whole pipeline on every slot; `false` splits it into a rollout and a training
sub-graph on slots of their own (`plan_placement`, `split_pipeline` over rl-core's `split_graph`), each slot
building only its sub-graph's engines, with the actor's updates broadcast to the rollout slots (`WeightSender`,
`WeightReceiver`). Checkpoints under `<output_dir>/checkpoints/step_N` are committed atomically;
`trainer.resume: auto` continues from the newest.
"""

from rl_runtime.trainer._checkpoints import (
    CHECKPOINTS_DIR,
    STATE_FILE,
    checkpoint_root,
    complete_checkpoints,
    latest_checkpoint,
    prune_checkpoints,
    read_state,
)
from rl_runtime.trainer._data import ConcatSource, open_files, steps_per_epoch
from rl_runtime.trainer._engines import build_actor, build_critic, build_reference, build_rollout, uses_reference
from rl_runtime.trainer._errors import CheckpointStateError, TrainerError
from rl_runtime.trainer._loop import Trainer, TrainResult, load_pipeline
from rl_runtime.trainer._session import DRIVER_BYTES_METRIC, TrainingSession
from rl_runtime.trainer._split import RECEIVE_WEIGHTS_NODE, plan_placement, split_pipeline
from rl_runtime.trainer._validation import PASS_SCORE, evaluate_shard, reduce_validation
from rl_runtime.trainer._weight_link import WeightReceiver, WeightSender
from rl_runtime.trainer._worker_state import RunHooks, RunResourcesFactory, SlotEngines

__all__ = [
    "CHECKPOINTS_DIR",
    "DRIVER_BYTES_METRIC",
    "PASS_SCORE",
    "RECEIVE_WEIGHTS_NODE",
    "STATE_FILE",
    "CheckpointStateError",
    "ConcatSource",
    "RunHooks",
    "RunResourcesFactory",
    "SlotEngines",
    "TrainResult",
    "Trainer",
    "TrainerError",
    "TrainingSession",
    "WeightReceiver",
    "WeightSender",
    "build_actor",
    "build_critic",
    "build_reference",
    "build_rollout",
    "checkpoint_root",
    "complete_checkpoints",
    "evaluate_shard",
    "latest_checkpoint",
    "load_pipeline",
    "open_files",
    "plan_placement",
    "prune_checkpoints",
    "read_state",
    "reduce_validation",
    "split_pipeline",
    "steps_per_epoch",
    "uses_reference",
]
