"""LIBERO adapter (behind the `rl-recipes[libero]` extra): the "real benchmark" path, never run in CI.

A suite (`env.tasks = ("libero_goal",)`) gives the tasks; each task's stored initial states are its trials. The user
provides LIBERO's assets folder (`env.options.assets_dir`: not on PyPI) and an SFT'd VLA; rendering uses
`MUJOCO_GL` (default egl). Each env keeps one simulator per task and only calls `set_init_state` on reset (re-creating
it costs 7-18 s on CPU). Actions are (7,) bin indices decoded as OpenVLA does (bin b -> centre of bin min(b, n-2) of
linspace(-1, 1, n)), unnormalised with `action_low`/`action_high` (the checkpoint's q01/q99), and the gripper is
mapped [0, 1] -> [-1, 1], sign-binarised and inverted, as siiRL's LIBERO adapter does.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch

from rl_core.envs import EnvConfig, EnvConfigError, EnvSpec, EnvTick, VectorEnv, register_environment, vector_env

ACTION_DIMS = 7
_DUMMY_ACTION = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0)  # no motion, gripper open: the settle ("wait") steps
_OPTIONS: dict[str, object] = {
    "assets_dir": None,
    "image_size": 128,
    "num_steps_wait": 10,
    "action_bins": 256,
    "action_low": [-1.0] * ACTION_DIMS,
    "action_high": [1.0] * ACTION_DIMS,
}
_ASSETS_FIX = (
    "download LIBERO's assets folder (github.com/Lifelong-Robot-Learning/LIBERO, libero/libero/assets, ~206 MB) and "
    "set env.options.assets_dir to it"
)


class LiberoApi(NamedTuple):
    """The three entry points of LIBERO the adapter uses (a fake can provide them in tests)."""

    get_benchmark_dict: Callable[[], Mapping[str, Any]]
    get_libero_path: Callable[[str], str]
    off_screen_render_env: Callable[..., Any]


def write_libero_config(assets_dir: str) -> Path:
    """Write a LIBERO config.yaml pointing at the installed package and `assets_dir`; return its folder.

    LIBERO prompts on stdin for this file on first import (an EOFError in batch jobs), so it is written beforehand.
    """
    spec = importlib.util.find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        raise EnvConfigError(
            "env.name: 'libero' needs the LIBERO extra, which is not installed; pip install 'rl-recipes[libero]'"
        )
    root = Path(next(iter(spec.submodule_search_locations))) / "libero"
    folder = Path(tempfile.gettempdir()) / "rl_recipes_libero"
    folder.mkdir(parents=True, exist_ok=True)
    entries = {
        "benchmark_root": root,
        "bddl_files": root / "bddl_files",
        "init_states": root / "init_files",
        "datasets": root.parent / "datasets",
        "assets": Path(assets_dir),
    }
    (folder / "config.yaml").write_text("".join(f"{key}: {value}\n" for key, value in entries.items()))
    return folder


def load_libero_api(assets_dir: str) -> LiberoApi:
    """Import LIBERO lazily (setting `MUJOCO_GL` and `LIBERO_CONFIG_PATH` unless the user set them)."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    if "LIBERO_CONFIG_PATH" not in os.environ:
        os.environ["LIBERO_CONFIG_PATH"] = str(write_libero_config(assets_dir))
    try:
        from libero.libero import benchmark, get_libero_path  # pyright: ignore[reportMissingImports]
        from libero.libero.envs import OffScreenRenderEnv  # pyright: ignore[reportMissingImports]
    except ImportError as exc:
        raise EnvConfigError(
            f"env.name: 'libero' could not import LIBERO ({exc}); pip install 'rl-recipes[libero]' "
            "(robosuite 1.4, mujoco 3.x)"
        ) from exc
    return LiberoApi(benchmark.get_benchmark_dict, get_libero_path, OffScreenRenderEnv)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]


def libero_options(options: Mapping[str, object]) -> dict[str, Any]:
    """LIBERO's `env.options` with defaults filled and checked; a missing assets folder is refused here."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise EnvConfigError(f"env.options: unknown LIBERO option(s) {unknown}; valid options are {sorted(_OPTIONS)}")
    merged: dict[str, Any] = {**_OPTIONS, **options}
    assets = merged["assets_dir"]
    if not isinstance(assets, str) or not assets:
        raise EnvConfigError(f"env.options.assets_dir: LIBERO needs its assets folder, none was given; {_ASSETS_FIX}")
    if not Path(assets).is_dir():
        raise EnvConfigError(f"env.options.assets_dir: {assets!r} is not a folder; {_ASSETS_FIX}")
    for name in ("action_low", "action_high"):
        value = merged[name]
        if not isinstance(value, (list, tuple)) or len(value) != ACTION_DIMS:  # pyright: ignore[reportUnknownArgumentType]
            raise EnvConfigError(
                f"env.options.{name}: expected {ACTION_DIMS} numbers (the checkpoint's q01/q99 per action dim), "
                f"got {value!r}"
            )
    for name in ("image_size", "num_steps_wait", "action_bins"):
        if not isinstance(merged[name], int) or merged[name] < (2 if name == "action_bins" else 0):
            raise EnvConfigError(f"env.options.{name}: expected a non-negative int, got {merged[name]!r}")
    return merged


def decode_bins(bins: Sequence[int], num_bins: int, low: Sequence[float], high: Sequence[float]) -> list[float]:
    """(7,) bin indices -> LIBERO's continuous action (OpenVLA decode, unnormalise, siiRL's gripper mapping)."""
    edges = torch.linspace(-1.0, 1.0, num_bins)
    centres = (edges[:-1] + edges[1:]) / 2
    normalised = centres[torch.tensor(list(bins)).clamp(0, num_bins - 2)]
    action = 0.5 * (normalised + 1.0) * (torch.tensor(list(high)) - torch.tensor(list(low))) + torch.tensor(list(low))
    gripper = 2.0 * float(action[-1]) - 1.0  # [0, 1] -> [-1, 1]
    action[-1] = -(1.0 if gripper > 0 else -1.0)  # sign-binarised, then inverted (LIBERO: -1 opens)
    return [float(a) for a in action]


def _suite(api: LiberoApi, config: EnvConfig) -> Any:
    suites = api.get_benchmark_dict()
    if len(config.tasks) != 1 or config.tasks[0] not in suites:
        raise EnvConfigError(
            f"env.tasks: LIBERO takes exactly one suite name, got {config.tasks}; use one of {sorted(suites)}"
        )
    return suites[config.tasks[0]]()


def libero_spec(config: EnvConfig, api: LiberoApi) -> EnvSpec:
    """The `EnvSpec` of a LIBERO suite: its tasks' language, trials bounded by the stored initial states."""
    options = libero_options(config.options)
    suite = _suite(api, config)
    names = tuple(str(suite.get_task(t).language) for t in range(suite.n_tasks))
    stored = min(len(suite.get_task_init_states(t)) for t in range(suite.n_tasks))
    if not 1 <= config.num_trials <= stored:
        raise EnvConfigError(
            f"env.num_trials: {config.tasks[0]} stores {stored} initial states per task, got {config.num_trials}; "
            f"set env.num_trials to 1..{stored}"
        )
    size = options["image_size"]
    return EnvSpec(config.name, (3, size, size), ACTION_DIMS, options["action_bins"], config.max_steps, names,
                   config.num_trials)  # fmt: skip


class LiberoEpisodeEnv:
    """One LIBERO env: a simulator per task (built on first use), reset to a stored initial state per trial."""

    def __init__(self, config: EnvConfig, api_loader: Callable[[str], LiberoApi] = load_libero_api) -> None:
        self._options = libero_options(config.options)
        self._api = api_loader(self._options["assets_dir"])
        self._suite = _suite(self._api, config)
        self._seed = config.seed
        self._envs: dict[int, Any] = {}
        self._env: Any = None

    def reset(self, task_id: int, trial_id: int) -> EnvTick:
        """Reset task `task_id`'s simulator to initial state `trial_id`, then settle for `num_steps_wait` steps."""
        task = self._suite.get_task(task_id)
        if task_id not in self._envs:
            bddl = os.path.join(self._api.get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
            size = self._options["image_size"]
            env = self._api.off_screen_render_env(bddl_file_name=bddl, camera_heights=size, camera_widths=size)
            env.seed(self._seed)
            self._envs[task_id] = env
        self._env = self._envs[task_id]
        self._env.reset()
        obs = self._env.set_init_state(self._suite.get_task_init_states(task_id)[trial_id])
        for _ in range(self._options["num_steps_wait"]):
            obs, _, _, _ = self._env.step(list(_DUMMY_ACTION))
        return EnvTick(_frame(obs), instruction=str(task.language), state=_proprio(obs))

    def step(self, action: Sequence[int]) -> EnvTick:
        """Decode the (7,) bins and step the simulator; LIBERO's `done` is success."""
        opts = self._options
        continuous = decode_bins(action, opts["action_bins"], opts["action_low"], opts["action_high"])
        obs, _, done, _ = self._env.step(continuous)
        return EnvTick(_frame(obs), done=bool(done), success=bool(done), state=_proprio(obs))

    def close(self) -> None:
        """Close every simulator."""
        for env in self._envs.values():
            env.close()
        self._envs.clear()


def _frame(obs: Mapping[str, Any]) -> torch.Tensor:
    image = torch.as_tensor(obs["agentview_image"].copy())  # (H, W, 3) uint8, rendered upside down
    return image.flip(0, 1).permute(2, 0, 1).contiguous()


def _proprio(obs: Mapping[str, Any]) -> torch.Tensor | None:
    keys = ("robot0_eef_pos", "robot0_eef_quat", "robot0_gripper_qpos")
    if not all(key in obs for key in keys):
        return None
    return torch.cat([torch.as_tensor(obs[key], dtype=torch.float32).flatten() for key in keys])


def libero_vector_env(config: EnvConfig, api_loader: Callable[[str], LiberoApi] = load_libero_api) -> VectorEnv:
    """LIBERO as a `VectorEnv`; options, suite and trials are checked here, before any worker starts."""
    options = libero_options(config.options)
    spec = libero_spec(config, api_loader(options["assets_dir"]))
    return vector_env(config, spec, functools.partial(LiberoEpisodeEnv, config, api_loader))


@register_environment("libero")
def make_libero(config: EnvConfig) -> VectorEnv:
    """The registered factory: `libero_vector_env` with the real LIBERO package."""
    return libero_vector_env(config)
