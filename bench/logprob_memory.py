"""Peak memory of naive versus chunked per-token log-prob + entropy, from logits and from hidden states.

Shapes (defaults): B = 4, T = 2048 (N = 8192 tokens), V = 32000, H = 1024, float32.

Variants, each measured in its own fresh child process (forked from a forkserver that has only imported
torch and rl-core) so one variant's peak cannot leak into another's:
  path    logits: inputs are `(B, T, V)` logits.
          hidden: inputs are `(B, T, H)` hidden states and the `(V, H)` LM-head weight.
  impl    naive:   `log_softmax` of the full logits (hidden path: `logits = hidden @ W.T` first), `gather`
                   for the log-probs, `-(p * log p).sum(-1)` for the entropy; plain autograd.
          chunked: `rl_core.logprobs.log_probs_and_entropy_from_logits` / `..._from_hidden`.
  mode    forward:          under `torch.no_grad()` (old / reference log-probs).
          forward+backward: `(log_probs + entropy).sum().backward()`, gradients land in `.grad`.

Measurement: the peak memory *above a baseline taken after the inputs are allocated* (and after a warm-up
call on tiny inputs, so lazily created kernels and thread pools are not counted), i.e. what the
computation itself needs on top of its inputs; the input gradients count, since both impls produce them.
  cpu:  the peak resident set. The kernel's high-water mark (VmHWM in /proc/self/status) is reset by writing
        "5" to /proc/self/clear_refs; the baseline is VmRSS right after that reset and the peak is VmHWM after
        the run, so the increase is VmHWM - VmRSS(baseline). Where the reset is not permitted, VmHWM may
        still hold an earlier peak and the figure is an upper bound (the table says so).
  cuda: `torch.cuda.max_memory_allocated()` after `reset_peak_memory_stats()`, minus `memory_allocated()`
        at the baseline (the caching allocator's reserve is not counted).

The summary line compares like with like on the hidden-state path, forward+backward (the training case,
where the chunked function never materialises the `(N, V)` logits at all):
  RESULT logprob_memory peak_ratio=<chunked/naive> ratio=<same> goal=0.25 met|missed

Run: python bench/logprob_memory.py [--device cpu|cuda] [--dtype float32|bfloat16]
(about two minutes and under 6 GiB on a 2-core CPU machine with the defaults; the times in the table are
wall-clock and only indicative on a shared machine).
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    import torch

GOAL_RATIO = 0.25
"""Chunked peak must be at most a quarter of the naive peak (forward+backward, hidden path) to meet the goal."""

PATHS = ("logits", "hidden")
IMPLS = ("naive", "chunked")
MODES = ("forward", "forward+backward")
MIB = 2**20
# Warm-up sizes: big enough to touch every kernel (several chunks), small enough to cost nothing.
WARMUP_BATCH, WARMUP_SEQ, WARMUP_VOCAB, WARMUP_HIDDEN, WARMUP_CHUNK = 1, 16, 64, 8, 4


def _status_kib(field: str) -> int:
    """A `/proc/self/status` memory field (VmRSS, VmHWM) in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_cpu_peak() -> bool:
    """Reset VmHWM to the current VmRSS; False where the kernel does not allow it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _make_inputs(
    path: str, sizes: dict[str, int], dtype: torch.dtype, device: torch.device, requires_grad: bool
) -> dict[str, torch.Tensor]:
    import torch

    generator = torch.Generator(device=device).manual_seed(0)
    batch, seq, vocab, width = sizes["batch"], sizes["seq"], sizes["vocab"], sizes["hidden"]
    labels = torch.randint(0, vocab, (batch, seq), generator=generator, device=device)
    if path == "logits":
        logits = torch.randn(batch, seq, vocab, generator=generator, device=device, dtype=dtype)
        return {"logits": logits.requires_grad_(requires_grad), "labels": labels}
    hidden = torch.randn(batch, seq, width, generator=generator, device=device, dtype=dtype)
    weight = torch.randn(vocab, width, generator=generator, device=device, dtype=dtype) * width**-0.5
    return {
        "hidden": hidden.requires_grad_(requires_grad),
        "weight": weight.requires_grad_(requires_grad),
        "labels": labels,
    }


def _compute(
    path: str, impl: str, inputs: dict[str, torch.Tensor], chunk_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log_probs, entropy) for one variant."""
    import torch

    from rl_core.logprobs import log_probs_and_entropy_from_hidden, log_probs_and_entropy_from_logits

    labels = inputs["labels"]
    if impl == "chunked" and path == "logits":
        return log_probs_and_entropy_from_logits(inputs["logits"], labels, chunk_size=chunk_size)
    if impl == "chunked":
        return log_probs_and_entropy_from_hidden(inputs["hidden"], inputs["weight"], labels, chunk_size=chunk_size)
    logits = inputs["logits"] if path == "logits" else inputs["hidden"] @ inputs["weight"].T
    log_p = torch.log_softmax(logits.float(), dim=-1)
    log_probs = log_p.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    entropy = -(log_p.exp() * log_p).sum(-1)
    return log_probs, entropy


def _run_once(path: str, impl: str, mode: str, inputs: dict[str, torch.Tensor], chunk_size: int) -> None:
    import torch

    if mode == "forward":
        with torch.no_grad():
            _compute(path, impl, inputs, chunk_size)
        return
    log_probs, entropy = _compute(path, impl, inputs, chunk_size)
    (log_probs + entropy).sum().backward()


def _measure_here(variant: tuple[str, str, str], config: dict) -> dict:
    """Measure one variant in this (fresh) process: peak bytes above the post-input baseline, and seconds."""
    import torch

    path, impl, mode = variant
    device = torch.device(config["device"])
    dtype = getattr(torch, config["dtype"])
    wants_grad = mode == "forward+backward"
    warmup = {"batch": WARMUP_BATCH, "seq": WARMUP_SEQ, "vocab": WARMUP_VOCAB, "hidden": WARMUP_HIDDEN}
    _run_once(path, impl, mode, _make_inputs(path, warmup, dtype, device, wants_grad), WARMUP_CHUNK)
    inputs = _make_inputs(path, config["sizes"], dtype, device, wants_grad)
    gc.collect()
    exact = True
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        baseline = torch.cuda.memory_allocated(device)
    else:
        exact = _reset_cpu_peak()
        baseline = _status_kib("VmRSS") * 1024
    start = time.perf_counter()
    _run_once(path, impl, mode, inputs, config["chunk_size"])
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device)
    else:
        peak = _status_kib("VmHWM") * 1024
    return {"peak_bytes": peak - baseline, "seconds": time.perf_counter() - start, "exact": exact}


def _worker(variant: tuple[str, str, str], config: dict, sender: Connection) -> None:
    """Child-process entry: send back the measurement, or the traceback of what went wrong."""
    try:
        sender.send(("ok", _measure_here(variant, config)))
    except BaseException:
        sender.send(("error", traceback.format_exc()))
    finally:
        sender.close()


def _measure(variant: tuple[str, str, str], config: dict) -> dict:
    """Run one variant in a fresh child process and return its measurement.

    Children come from a forkserver that has imported torch and rl-core but run nothing: each child is a
    new process (its own address space and peak), without paying the import again.
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "rl_core.logprobs"])
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_worker, args=(variant, config, sender))
    process.start()
    sender.close()
    try:
        status, payload = receiver.recv()
    except EOFError:
        status, payload = "error", "child exited without a result (killed for memory?)"
    process.join()
    if status != "ok":
        raise SystemExit(f"variant {variant} failed (exit {process.exitcode}):\n{payload}")
    return payload


def _parse() -> argparse.Namespace:
    from rl_core.logprobs import DEFAULT_CHUNK_SIZE

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:i]")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE)
    return parser.parse_args()


def main() -> None:
    args = _parse()
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("--device cuda asked for, but torch.cuda.is_available() is False")
    tokens = args.batch * args.seq
    sizes = {"batch": args.batch, "seq": args.seq, "vocab": args.vocab, "hidden": args.hidden}
    config = {"device": args.device, "dtype": args.dtype, "sizes": sizes, "chunk_size": args.chunk_size}
    print(
        f"logprob_memory: device={args.device} dtype={args.dtype} B={args.batch} T={args.seq} (N={tokens}) "
        f"V={args.vocab} H={args.hidden} chunk_size={args.chunk_size}; one (N, V) float32 = "
        f"{tokens * args.vocab * 4 / MIB:.0f} MiB"
    )
    results = {}
    for path in PATHS:
        for mode in MODES:
            for impl in IMPLS:
                results[path, impl, mode] = _measure((path, impl, mode), config)
    print(
        f"{'path':<8} {'mode':<17} {'naive MiB':>10} {'chunked MiB':>12} {'ratio':>7} {'naive s':>8} {'chunked s':>10}"
    )
    for path in PATHS:
        for mode in MODES:
            naive, chunked = results[path, "naive", mode], results[path, "chunked", mode]
            ratio = chunked["peak_bytes"] / naive["peak_bytes"]
            print(
                f"{path:<8} {mode:<17} {naive['peak_bytes'] / MIB:>10.0f} {chunked['peak_bytes'] / MIB:>12.0f} "
                f"{ratio:>7.3f} {naive['seconds']:>8.2f} {chunked['seconds']:>10.2f}"
            )
    if not all(r["exact"] for r in results.values()):
        print("note: /proc/self/clear_refs was not writable; CPU peaks are upper bounds")
    headline = results["hidden", "chunked", "forward+backward"]["peak_bytes"] / max(
        results["hidden", "naive", "forward+backward"]["peak_bytes"], 1
    )
    verdict = "met" if headline <= GOAL_RATIO else "missed"
    print(f"RESULT logprob_memory peak_ratio={headline:.3f} ratio={headline:.3f} goal={GOAL_RATIO} {verdict}")


if __name__ == "__main__":
    main()
