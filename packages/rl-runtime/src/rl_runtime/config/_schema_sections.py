"""Run-config sections of the data, batch sizes, rollout sampling, device placement and the trainer loop."""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import attrs

from rl_coordinator.loading import datasets_installed, needs_datasets
from rl_core import nearest_name
from rl_engines.rollout import ROLLOUT_ENGINES
from rl_runtime.config._errors import ConfigError, config_error
from rl_runtime.config._validators import (
    int_at_least,
    non_empty_str,
    number_in,
    of_type,
    optional,
    registered_name,
    registered_names,
)
from rl_runtime.metrics import LOG_SINKS, missing_sink_extra

UNWIRED_ROLLOUT_ENGINES = {
    "sglang": (
        "rl_engines.sglang.SGLangEngine needs CUDA builds of sglang and has never run through the trainer (it is "
        "untested here: the CI machines have no GPU), so no trainer builder is registered for it"
    ),
}
"""rl-engines' inference engines that the trainer cannot build yet, each with the reason; `rollout.engine` refuses
them at load time, saying so, until a builder is registered in rl_engines.rollout.ROLLOUT_ENGINES."""
RESUME_AUTO = "auto"
"""Resume from the newest checkpoint under the output folder when there is one."""
RESUME_NEVER = "never"
"""Always start from scratch."""
RAY_LAUNCHER = "ray"
TORCHRUN_LAUNCHER = "torchrun"
LAUNCHERS = (RESUME_AUTO, RAY_LAUNCHER, TORCHRUN_LAUNCHER)
"""`trainer.launcher`: auto (torchrun when its environment variables are set, else Ray), ray (one Ray actor per
slot) or torchrun (this process is one slot: `torchrun --nproc-per-node N -m rl_recipes train ...`)."""

_DEFAULT_MAX_LENGTH = 512
_DEFAULT_PROMPTS_PER_STEP = 8
_TOP_K_DISABLED = -1
_DEFAULT_STEP_TIMEOUT_S = 3600.0
"""An RL step of a large model can take many minutes; an hour without any worker finishing is a hang."""


def _check_paths(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple) or not all(isinstance(item, Path) for item in value):
        raise config_error(attribute.name, "a list of paths", value)
    hf = [str(path) for path in value if needs_datasets(path)]
    if hf and not datasets_installed():
        raise config_error(
            attribute.name,
            "paths readable without the `datasets` package (jsonl or parquet files): folders and .csv/.json files "
            "are read with Hugging Face datasets, which is not installed",
            hf,
            "pip install 'rl-coordinator[datasets]'",
        )


def _check_train_files(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _check_paths(instance, attribute, value)
    if not value:
        raise config_error(attribute.name, "at least one training data file", value, "list the files to train on")


@attrs.frozen
class DataConfig:
    """The prompt data set and how prompts are cut and ordered."""

    train_files: tuple[Path, ...] = attrs.field(validator=_check_train_files)
    """Training prompt files, relative to the working directory: jsonl or parquet files, or (with the `datasets`
    extra) a Hugging Face datasets folder (`save_to_disk`, or a folder of data files) or .csv/.json files; sharded
    over the ranks by row index, resumed exactly."""
    val_files: tuple[Path, ...] = attrs.field(default=(), validator=_check_paths)
    """Held-out prompt files for validation, in the forms `train_files` takes; empty disables validation."""
    prompt_key: str = attrs.field(default="prompt", validator=non_empty_str)
    """Column holding the prompt (text or a chat message list)."""
    max_prompt_length: int = attrs.field(default=_DEFAULT_MAX_LENGTH, validator=int_at_least(1))
    """Longest prompt in tokens. The training prompts are tokenized once, when the rollout workers start: a longer
    one stops the run there, before its first step, with an error naming its row (a held-out one, at the validation
    that reads it)."""
    max_response_length: int = attrs.field(default=_DEFAULT_MAX_LENGTH, validator=int_at_least(1))
    """Longest response in tokens (the rollout's token budget per sample)."""
    seed: int = attrs.field(default=0, validator=int_at_least(0))
    """Seed of the shuffling."""
    shuffle: bool = attrs.field(default=True, validator=of_type(bool))
    """Shuffle the prompts every epoch."""


class WeightSyncKind(enum.Enum):
    """How the actor's weights reach the rollout engine after every update (rl_engines.sync's transports)."""

    AUTO = "auto"
    """The fastest transport the rollout engine's placement allows (see rl_runtime.config.weight_sync_transports)."""
    REFERENCE = "reference"
    """Tensors handed over by reference: an engine in the worker's own process ("hf", "vllm")."""
    SHARED_MEMORY = "shared_memory"
    """Buckets packed into shared memory (CUDA IPC on GPU), handles sent: an engine on the same host."""
    DISK = "disk"
    """A safetensors checkpoint per update under the run's output folder, which the engine loads: any engine that
    can read that folder (each server of a fleet has its own folder, written once per server)."""
    BROADCAST = "broadcast"
    """A gloo (CPU) or NCCL (GPU) group of the worker and its engine, every tensor broadcast (each server of a fleet
    in a group of its own, so one that dies breaks no other's)."""


def _check_servers(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple) or not all(isinstance(item, str) for item in value):
        raise config_error(attribute.name, "a list of server addresses (http://host:port)", value)
    for address in value:
        parsed = urlparse(address)
        if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.port is None:
            raise config_error(attribute.name, "addresses of the form http://host:port", address)


class RankBalancing(enum.Enum):
    """Whether and how a step's samples are re-partitioned over the train ranks before the actor's passes."""

    NONE = "none"
    """Each rank trains on the samples its rollout rank generated."""
    SAMPLES = "samples"
    """Equal token sums per rank, sample by sample (verl `trainer.balance_batch`)."""
    GROUPS = "groups"
    """Equal token sums per rank with each prompt's group of samples kept on one rank."""


@attrs.frozen
class BatchConfig:
    """How many samples one training step takes and how it splits into optimizer steps (see `BatchPlan`)."""

    prompts_per_step: int = attrs.field(default=_DEFAULT_PROMPTS_PER_STEP, validator=int_at_least(1))
    """Prompts drawn per training step (verl `data.train_batch_size`)."""
    samples_per_prompt: int = attrs.field(default=1, validator=int_at_least(1))
    """Responses sampled per prompt, the GRPO group size (verl `rollout.n`)."""
    mini_batches_per_step: int = attrs.field(default=1, validator=int_at_least(1))
    """Optimizer steps per PPO epoch: the step's samples split into this many mini-batches."""
    ppo_epochs: int = attrs.field(default=1, validator=int_at_least(1))
    """Passes over the step's samples (verl `ppo_epochs`)."""
    balance_across_ranks: RankBalancing = attrs.field(default=RankBalancing.NONE, validator=of_type(RankBalancing))
    """"none", "samples" or "groups": re-partition each step's samples over the train ranks by token count once
    the advantages are computed (a `rebalance` node, see rl_runtime.nodes._rebalance.with_rebalance; needs the run's
    DataCoordinator when there are several ranks), and report verl's `global_seqlen/*` before and after."""


_check_registered_engine = registered_name(ROLLOUT_ENGINES, "rollout engine")


def _check_rollout_engine(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, str) and value in UNWIRED_ROLLOUT_ENGINES and value not in ROLLOUT_ENGINES:
        names = ", ".join(repr(name) for name in sorted(ROLLOUT_ENGINES))
        raise config_error(
            attribute.name,
            f"an engine the trainer can build (rl_engines.rollout.ROLLOUT_ENGINES: {names})",
            value,
            f"{UNWIRED_ROLLOUT_ENGINES[value]}; use {names}",
        )
    _check_registered_engine(instance, attribute, value)


def _check_top_k(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or (value != _TOP_K_DISABLED and value < 1):
        raise config_error(attribute.name, "-1 (disabled) or an int >= 1", value)


_check_positive = number_in(0, low_open=True)


def _check_temperature(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # The actor and reference roles refuse a temperature of 0 when the workers build them; refused here instead.
    try:
        _check_positive(instance, attribute, value)
    except ConfigError as error:
        fix = "set one > 0 (1.0 samples the model as it is); greedy decoding is for validation: val_temperature=0"
        raise ConfigError([attrs.evolve(problem, fix=fix) for problem in error.problems]) from None


@attrs.frozen
class RolloutConfig:
    """How responses are sampled (the group size is `batch.samples_per_prompt`)."""

    engine: str = attrs.field(default="hf", validator=_check_rollout_engine)
    """Inference engine, a name in rl_engines.rollout.ROLLOUT_ENGINES (the engines the trainer can build): "hf"
    (in-process transformers), "vllm" (in-process vllm.LLM), "server" (our HTTP rollout server, one started on
    each rollout slot, or the fleet in `servers`)."""
    servers: tuple[str, ...] = attrs.field(default=(), validator=_check_servers)
    """With engine "server": addresses (http://host:port) of rollout servers already running, dealt among the
    rollout slots (each slot balances its requests over its share); empty starts one server per rollout slot on
    127.0.0.1."""
    weight_sync: WeightSyncKind = attrs.field(default=WeightSyncKind.AUTO, validator=of_type(WeightSyncKind))
    """"auto", "reference", "shared_memory", "disk" or "broadcast": how weights reach the engine after an update;
    a transport the engine's placement cannot use is refused at load time. Under split placement the weights
    cross from the training slots to each rollout slot by broadcast first; this is the last hop, into its engine."""
    temperature: float = attrs.field(default=1.0, validator=_check_temperature)
    """Sampling temperature, > 0: the actor and the reference divide their logits by it to score the samples
    (greedy validation is `val_temperature` 0)."""
    top_p: float = attrs.field(default=1.0, validator=number_in(0, 1, low_open=True))
    """Nucleus sampling mass; 1 disables it."""
    top_k: int = attrs.field(default=_TOP_K_DISABLED, validator=_check_top_k)
    """Sample among the k most likely tokens; -1 disables it."""
    max_new_tokens: int | None = attrs.field(default=None, validator=optional(int_at_least(1)))
    """Token budget of a response; null uses `data.max_response_length`."""
    val_samples_per_prompt: int = attrs.field(default=1, validator=int_at_least(1))
    """Responses per validation prompt (k of the reported pass@k)."""
    val_temperature: float = attrs.field(default=0.0, validator=number_in(0))
    """Sampling temperature of validation; must be > 0 when `val_samples_per_prompt` > 1."""
    engine_kwargs: dict[str, Any] = attrs.field(factory=dict, validator=of_type(dict))
    """Engine-specific settings, passed to the engine's own config (checked there): HFEngineConfig fields for "hf",
    VLLMEngineConfig fields for "vllm", ServerEngineConfig fields (timeouts, retries; checked when the config loads)
    for "server", see docs/rollout-servers.md."""
    workflow: str = attrs.field(default="single_turn", validator=non_empty_str)
    """The rollout workflow (`rl_core.workflows`): a registered name ("single_turn", the one-reply path run as one
    batched engine call), a module path 'pkg.mod:Name' or a file 'path/to/file.py:Name'; built in each rollout worker
    with `workflow_kwargs`, checked at load time. Validation always samples single-turn."""
    workflow_kwargs: dict[str, Any] = attrs.field(factory=dict, validator=of_type(dict))
    """Keywords the workflow's class or factory is built with (turn limits, tool settings, ...)."""
    episode_timeout_s: float | None = attrs.field(default=None, validator=optional(number_in(0, low_open=True)))
    """A workflow episode still running after this many seconds is cancelled and counted as failed; null waits."""

    def __attrs_post_init__(self) -> None:
        if self.val_samples_per_prompt > 1 and self.val_temperature == 0:
            raise config_error(
                "val_temperature",
                f"> 0 with val_samples_per_prompt={self.val_samples_per_prompt} (greedy samples are identical)",
                self.val_temperature,
                "set val_temperature (e.g. 0.6) or val_samples_per_prompt=1",
            )


class ApportionStrategy(enum.Enum):
    """How the planner shares slots among the pipeline's sub-graphs when they are not colocated."""

    EVEN = "even"
    """The same number of slots per sub-graph."""
    PARAM_AWARE = "param_aware"
    """Slots in proportion to each sub-graph's model parameters."""


class DeviceKind(enum.Enum):
    """What a slot is."""

    AUTO = "auto"
    """A GPU when Ray sees GPUs, else a CPU."""
    CPU = "cpu"
    CUDA = "cuda"


@attrs.frozen
class PlacementConfig:
    """Which device slots run which part of the pipeline."""

    slots: int = attrs.field(default=1, validator=int_at_least(1))
    """Device slots (GPUs, or CPU workers) in the run."""
    slots_per_node: int | None = attrs.field(default=None, validator=optional(int_at_least(1)))
    """Slots on each machine; null puts all of them on one machine."""
    device: DeviceKind = attrs.field(default=DeviceKind.AUTO, validator=of_type(DeviceKind))
    """"auto", "cpu" or "cuda"."""
    colocate: bool = attrs.field(default=True, validator=of_type(bool))
    """Run every model on every slot (the rollout sleeps while training); false splits the slots among them."""
    strategy: ApportionStrategy = attrs.field(
        default=ApportionStrategy.PARAM_AWARE, validator=of_type(ApportionStrategy)
    )
    """How split placement apportions slots: "even" or "param_aware"."""
    node_cohesion: bool = attrs.field(default=True, validator=of_type(bool))
    """Keep the slots of one sub-graph on as few machines as possible."""
    node_load: bool = attrs.field(default=True, validator=of_type(bool))
    """Prefer the least loaded machine when placing a slot."""
    retain_host_memory: bool = attrs.field(default=True, validator=of_type(bool))
    """Workers keep freed host memory in their heap for reuse instead of returning it to the OS (glibc's mmap and
    trim thresholds raised): a tenth of a small CPU training step was page faults on fresh pages. Resident memory
    then stays at its peak; false keeps the C library's defaults."""

    def __attrs_post_init__(self) -> None:
        if self.slots_per_node is not None and self.slots % self.slots_per_node:
            raise config_error(
                "slots",
                f"a multiple of slots_per_node={self.slots_per_node}",
                self.slots,
                f"use slots={self.slots - self.slots % self.slots_per_node or self.slots_per_node}",
            )


def _check_resume(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise config_error(attribute.name, "'auto', 'never' or a checkpoint path", value)
    keywords = [RESUME_AUTO, RESUME_NEVER]
    if value in keywords or os.sep in value or (os.altsep and os.altsep in value):
        return
    # A bare word near a keyword is a typo, not a folder: `resume: atuo` must not start from scratch.
    near = nearest_name(value, keywords)
    if near:
        raise config_error(
            attribute.name,
            "'auto', 'never' or a checkpoint path",
            value,
            f"did you mean {near!r}? (./{value} for a folder)",
        )


def _check_sink_packages(_: object, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    # The sinks import their packages when the run builds them, after the workers start; refused here instead.
    for index, name in enumerate(value):
        missing = missing_sink_extra(name)
        if missing is not None:
            raise config_error(f"{attribute.name}.{index}", "a log sink whose package is installed", name, missing)


@attrs.frozen
class TrainerConfig:
    """The training loop: its length, validation, checkpoints, resumption and logging."""

    total_epochs: int = attrs.field(default=1, validator=int_at_least(1))
    """Passes over the training data."""
    total_steps: int | None = attrs.field(default=None, validator=optional(int_at_least(1)))
    """Stop after this many training steps, whatever `total_epochs` says; null runs every epoch."""
    validate_every: int = attrs.field(default=0, validator=int_at_least(0))
    """Validate every this many steps; 0 never validates during training."""
    validate_before_train: bool = attrs.field(default=True, validator=of_type(bool))
    """Validate once before the first step."""
    checkpoint_every: int = attrs.field(default=0, validator=int_at_least(0))
    """Save a checkpoint every this many steps; 0 saves only at the end."""
    keep_last: int | None = attrs.field(default=None, validator=optional(int_at_least(1)))
    """Keep only the newest this many checkpoints; null keeps all."""
    resume: str = attrs.field(default=RESUME_AUTO, validator=_check_resume)
    """"auto" (the newest checkpoint under `output_dir`, if any), "never", or a checkpoint folder."""
    output_dir: Path = attrs.field(default=Path("outputs"), validator=of_type(Path))
    """Folder of checkpoints and logs; one run at a time holds it (a lock file names the holder's pid and host)."""
    take_over: bool = attrs.field(default=False, validator=of_type(bool))
    """Start even though another live run holds `output_dir`'s lock; both then write there, so stop it first."""
    log_sinks: tuple[str, ...] = attrs.field(
        default=("console",), validator=[registered_names(LOG_SINKS, "log sink"), _check_sink_packages]
    )
    """Where metrics go: any of console, jsonl, tensorboard, wandb, mlflow (a sink whose package is not installed is
    refused when the config loads)."""
    project_name: str = attrs.field(default="rl", validator=non_empty_str)
    """Project name shown by the tracking sinks (wandb, mlflow)."""
    experiment_name: str = attrs.field(default="run", validator=non_empty_str)
    """Run name shown by the tracking sinks."""
    seed: int = attrs.field(default=0, validator=int_at_least(0))
    """Base seed of model initialisation and sampling."""
    step_timeout_s: float = attrs.field(default=_DEFAULT_STEP_TIMEOUT_S, validator=number_in(0, low_open=True))
    """Seconds a training step may take before the run stops with the ranks that did not finish."""
    steps_per_call: int = attrs.field(default=1, validator=int_at_least(1))
    """Steps every worker runs per call from the driver (never past a validation or checkpoint): more divides the
    driver's per-step cost, and metrics then reach the sinks that many steps at a time."""
    launcher: str = attrs.field(default="auto", validator=registered_name(LAUNCHERS, "launcher"))
    """How the slots run: "ray" (a DAG worker actor per slot), "torchrun" (each torchrun rank is a slot, no Ray;
    colocated placement only) or "auto" (torchrun when launched by it, Ray otherwise)."""
