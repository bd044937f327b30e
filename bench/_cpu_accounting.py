"""Where the CPU of a run goes: CPU-seconds per training step, by process and by thread, from /proc (Linux only).

`record` runs a command (a benchmark, `rl-recipes train ...`) and, each time one of the run folders' metrics.jsonl
files matching `--watch` gains lines (the driver logs a call's steps together), reads `/proc/<pid>/task/<tid>/`
`schedstat` (CPU time and run-queue wait, ns), `stat` (thread name, page faults) and `status` (voluntary and
involuntary context switches) for every process descended from the command: the driver, Ray's gcs_server and raylet,
its agents and every `ray::` worker. One JSON line per snapshot goes to `--out`. The sampler itself is not part of
the tree it reads; it polls the files' sizes every `--poll` seconds and reads /proc only when a line was added.

`report` takes two snapshots of each metrics file (after `--from` and after `--to` logged steps, by default the
steady window bench/async.py uses: after the first call of 5 steps and before the last; the last snapshot of a run
is taken while its workers exit, so a window must end before it) and prints, for every process (named by its Ray
title or command) and its busiest threads, CPU-ms per step, run-queue wait per step (time the thread was runnable
but another had the core), context switches and minor page faults per step, beside the window's wall time per step
and the steps' mean `timing_s/*` metrics; `--json` prints one line per window of CPU-ms per step by kind
(`summary`). CPU time is far steadier than wall time under other load, but not immune to it: the same node work
took 460-650 CPU-ms a step on these shared cores as the load moved, so compare kinds within a window, or paired runs.

  python bench/_cpu_accounting.py record --out /tmp/acct.jsonl --watch '/tmp/w/runs/async_*/**/metrics.jsonl' -- \\
      python bench/async.py --workdir /tmp/w --rounds 1
  python bench/_cpu_accounting.py report /tmp/acct.jsonl [--from 5 --to 20] [--threads 6] [--json]

`--watch` needs a file that grows as steps finish: `rl-recipes train` appends metrics.jsonl after every call of
`trainer.steps_per_call` steps; a driver of `Trainer(...).session()` (bench/_trl_ours_worker.py) writes none until it
ends, so have it append a line per step to a file of its own. Thread names are the kernel's (`comm`): Ray's C++
threads name themselves, Python threads on 3.11 keep the name of the thread that started them; `record --names`
adds each Python process's thread names from `py-spy dump` (pip install py-spy; it stops each process once, at its
first snapshot, so use it for exploring, not for the runs you compare).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TICKS = os.sysconf("SC_CLK_TCK")
NS = 1e9
STEPS_PER_CALL = 5
"""The recipes' `trainer.steps_per_call`: the default window is the calls after the first and before the last."""


def _read(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:  # the thread or process ended between listing and reading
        return None


def _stat_fields(text: str) -> tuple[str, list[str]]:
    """(comm, the fields after it) of a /proc stat line; field n of proc(5) is at index n - 3."""
    return text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (text := _read(f"/proc/{entry}/stat")) is not None:
            children[int(_stat_fields(text)[1][1])].append(int(entry))
    return children


def descendants(root: int) -> list[int]:
    """`root` and every process below it."""
    children, found, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def thread_sample(pid: int, tid: int) -> dict[str, Any] | None:
    """One thread's counters: name, cpu and run-queue wait (ns), voluntary/involuntary switches, minor faults."""
    base = f"/proc/{pid}/task/{tid}"
    stat, sched, status = _read(f"{base}/stat"), _read(f"{base}/schedstat"), _read(f"{base}/status")
    if stat is None or sched is None or status is None:
        return None
    comm, fields = _stat_fields(stat)
    cpu_ns, wait_ns, _ = (int(x) for x in sched.split())
    switches = {k: int(v) for k, v in (line.split(":") for line in status.splitlines() if "ctxt_switches" in line)}
    return {
        "comm": comm,
        "cpu": cpu_ns,
        "wait": wait_ns,
        "vcs": switches.get("voluntary_ctxt_switches", 0),
        "ics": switches.get("nonvoluntary_ctxt_switches", 0),
        "minflt": int(fields[7]),
    }


def process_sample(pid: int) -> dict[str, Any] | None:
    """A process's title, start time and every thread's counters."""
    stat, cmdline = _read(f"/proc/{pid}/stat"), _read(f"/proc/{pid}/cmdline")
    if stat is None or cmdline is None:
        return None
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return None
    threads = {str(tid): sample for tid in tids if (sample := thread_sample(pid, tid)) is not None}
    return {"start": int(_stat_fields(stat)[1][19]), "title": cmdline.replace("\0", " ").strip(), "threads": threads}


def snapshot(root: int) -> dict[str, Any]:
    """Every process under `root`, keyed by pid."""
    return {str(pid): sample for pid in descendants(root) if (sample := process_sample(pid)) is not None}


def _line_counts(pattern: str) -> dict[str, int]:
    counts = {}
    for path in glob.glob(pattern, recursive=True):
        with open(path, "rb") as handle:
            counts[path] = sum(1 for line in handle if line.strip())
    return counts


_PYSPY_THREAD = re.compile(r'^Thread (\d+) \(\w+\): "(.*)"$', re.MULTILINE)


def python_thread_names(pid: int) -> dict[str, str]:
    """tid -> Python thread name of a Python process, from `py-spy dump` (empty without py-spy or on failure).
    py-spy stops the process while it reads it (tens of ms): for exploring, not inside a measured window."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    try:
        text = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return dict(_PYSPY_THREAD.findall(text))


def record(out: Path, pattern: str, command: list[str], poll_s: float, names: bool = False) -> int:
    """Run `command`, snapshotting its process tree whenever a metrics file matching `pattern` grows; its status.
    `names`: add each Python process's thread names (`python_thread_names`) the first time a snapshot sees it."""
    child = subprocess.Popen(command)
    sizes: dict[str, int] = {}
    named: set[tuple[str, int]] = set()
    with out.open("w") as sink:
        while child.poll() is None:
            time.sleep(poll_s)
            current = {}
            for path in glob.glob(pattern, recursive=True):
                try:
                    current[path] = os.stat(path).st_size
                except OSError:
                    continue
            if current == sizes:
                continue
            sizes = current
            now = time.monotonic()
            procs = snapshot(child.pid)
            for pid, proc in procs.items() if names else ():
                if (pid, proc["start"]) not in named and ("python" in proc["title"] or "ray::" in proc["title"]):
                    named.add((pid, proc["start"]))
                    for tid, name in python_thread_names(int(pid)).items():
                        if tid in proc["threads"]:
                            proc["threads"][tid]["comm"] = f"py:{name}"
            sink.write(json.dumps({"t": now, "lines": _line_counts(pattern), "procs": procs}) + "\n")
            sink.flush()
    return child.returncode


def role(title: str) -> str:
    """A stable name for a process of a run from its command line."""
    if title.startswith("ray::"):
        return title.split()[0].split(".")[0]  # ray::DAGWorker.run_steps -> ray::DAGWorker
    words = title.split()
    for word in words:
        base = os.path.basename(word)
        if base in ("gcs_server", "raylet"):
            return base
        if word.endswith((".py", "_agent", "monitor")) and "python" not in base:
            return base
    return " ".join(os.path.basename(w) for w in words[:3])


def _window(snapshots: list[dict[str, Any]], path: str, lines: int) -> dict[str, Any] | None:
    for snap in snapshots:
        if snap["lines"].get(path, 0) >= lines:
            return snap
    return None


def _python_names(snapshots: list[dict[str, Any]]) -> dict[tuple[str, int, str], str]:
    """(pid, start, tid) -> the `py:` name any snapshot recorded (`record --names`)."""
    return {
        (pid, proc["start"], tid): thread["comm"]
        for snap in snapshots
        for pid, proc in snap["procs"].items()
        for tid, thread in proc["threads"].items()
        if thread["comm"].startswith("py:")
    }


def _delta(
    a: dict[str, Any], b: dict[str, Any], names: dict[tuple[str, int, str], str]
) -> Iterator[tuple[str, str, str, dict[str, float]]]:
    """(process key, title, thread key, counter deltas) of every thread alive in `b` (from zero if born after `a`)."""
    for pid, proc in b["procs"].items():
        before = a["procs"].get(pid)
        same = before is not None and before["start"] == proc["start"]
        for tid, thread in proc["threads"].items():
            old = before["threads"].get(tid) if same and before is not None else None
            delta = {k: thread[k] - (old[k] if old else 0) for k in ("cpu", "wait", "vcs", "ics", "minflt")}
            name = names.get((pid, proc["start"], tid), thread["comm"])
            yield f"{pid}", proc["title"], f"{tid} {name}", delta


def metrics_means(path: str, first: int, last: int) -> dict[str, float]:
    """The mean of every `timing_s/*` metric over the records `first` to `last` - 1."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()][first:last]
    keys = sorted({k for row in rows for k in row if k.startswith("timing_s/")})
    return {k: statistics.fmean(row.get(k, 0.0) for row in rows) for k in keys}


GLOO_THREADS = ("gloo_tcp_loop", "pt_gloo_runloop")
DAG_WORKER = "ray::DAGWorker"


def account(snapshots: list[dict[str, Any]], path: str, first: int, last: int) -> dict[str, Any] | None:
    """The counters of every process and thread between the snapshots after `first` and after `last` steps of
    `path`: {"steps", "wall", "timings", "procs": {pid: {"title", "sum", "threads": [(tid, counters)]}}}."""
    a, b = _window(snapshots, path, first), _window(snapshots, path, last)
    if a is None or b is None or a is b:
        return None
    procs: dict[str, dict[str, Any]] = {}
    for pid, title, tid, delta in _delta(a, b, _python_names(snapshots)):
        entry = procs.setdefault(pid, {"title": title, "sum": defaultdict(float), "threads": []})
        entry["title"] = title if not title.startswith("ray::IDLE") else entry["title"]
        for key, value in delta.items():
            entry["sum"][key] += value
        entry["threads"].append((tid, delta))
    steps = b["lines"][path] - a["lines"][path]
    timings = metrics_means(path, a["lines"][path], b["lines"][path])
    return {"first": a["lines"][path], "steps": steps, "wall": b["t"] - a["t"], "timings": timings, "procs": procs}


def summary(window: dict[str, Any]) -> dict[str, float]:
    """CPU-ms per step by kind: each DAG worker's busiest thread (`dag_busiest`, the node work), its other
    Python and unnamed threads (`dag_other`), its gloo threads (`dag_gloo`) and Ray's own threads (`dag_ray`), then
    whole processes by role (the coordinator, raylet, gcs_server, log monitor, the driver, ...)."""
    per_step = 1e3 / NS / window["steps"]
    kinds: dict[str, float] = defaultdict(float)
    for entry in window["procs"].values():
        name = role(entry["title"])
        if name != DAG_WORKER:
            kinds[name] += entry["sum"]["cpu"] * per_step
            continue
        threads = sorted(entry["threads"], key=lambda td: -td[1]["cpu"])
        for index, (tid, delta) in enumerate(threads):
            comm = tid.split(" ", 1)[1]
            if index == 0:
                kind = "dag_busiest"
            elif comm in GLOO_THREADS:
                kind = "dag_gloo"
            elif comm.startswith(("ray::", "py:")) and comm != "py:MainThread":
                kind = "dag_other"
            else:
                kind = "dag_ray"
            kinds[kind] += delta["cpu"] * per_step
    wall_ms = 1e3 * window["wall"] / window["steps"]
    return {"wall": wall_ms, "total": sum(kinds.values()), **dict(sorted(kinds.items(), key=lambda kv: -kv[1]))}


def report_file(snapshots: list[dict[str, Any]], path: str, first: int, last: int, threads: int, as_json: bool) -> None:
    """Print the CPU accounting of `path`'s records `first` .. `last` - 1 (one JSON line of `summary` with
    `as_json`)."""
    window = account(snapshots, path, first, last)
    if window is None:
        print(f"{path}: no snapshots after {first} and {last} steps", file=sys.stderr)
        return
    steps, wall = window["steps"], window["wall"]
    if as_json:
        timings = {k: 1e3 * v for k, v in window["timings"].items()}
        print(json.dumps({"file": path, "steps": steps, **summary(window), "timing_ms": timings}))
        return
    span = f"{window['first']}-{window['first'] + steps - 1}"
    print(f"\n{path}: steps {span} ({steps}), wall {1e3 * wall / steps:.1f} ms a step")
    print("  timing_s means (ms): " + ", ".join(f"{k[9:]} {1e3 * v:.1f}" for k, v in window["timings"].items()))
    per_proc = window["procs"]
    total = sum(e["sum"]["cpu"] for e in per_proc.values()) / NS / steps
    print(f"  all processes: {1e3 * total:.1f} CPU-ms a step ({total / (wall / steps):.2f} cores busy on average)")
    print("  by kind (ms a step): " + ", ".join(f"{k} {v:.1f}" for k, v in summary(window).items()))
    print(f"  {'process / thread':44s} {'cpu ms':>8s} {'wait ms':>8s} {'vol cs':>7s} {'inv cs':>7s} {'minflt':>7s}")
    for pid, entry in sorted(per_proc.items(), key=lambda kv: -kv[1]["sum"]["cpu"]):
        s = entry["sum"]
        if s["cpu"] / NS / steps < 1e-4:
            continue
        name = f"{pid} {role(entry['title'])}"[:44]
        print(f"  {name:44s} {_row(s, steps)}")
        for tid, delta in sorted(entry["threads"], key=lambda td: -td[1]["cpu"])[:threads]:
            if delta["cpu"] / NS / steps >= 1e-4:
                print(f"    {tid[:42]:42s} {_row(delta, steps)}")


def _row(counters: dict[str, float], steps: int) -> str:
    per = {k: v / steps for k, v in counters.items()}
    return (
        f"{1e3 * per['cpu'] / NS:8.2f} {1e3 * per['wait'] / NS:8.2f} {per['vcs']:7.1f} {per['ics']:7.1f} "
        f"{per['minflt']:7.1f}"
    )


def report(path: Path, first: int | None, last: int | None, threads: int, as_json: bool = False) -> None:
    """Print the accounting of every metrics file the snapshots in `path` saw."""
    snapshots = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    files = sorted({f for snap in snapshots for f in snap["lines"]})
    for metrics in files:
        counts = {snap["lines"].get(metrics, 0) for snap in snapshots}
        if len(counts) == 1:  # it did not grow while recorded: another run's file matching the glob
            continue
        count = max(counts)
        calls = -(-count // STEPS_PER_CALL)
        lo = first if first is not None else STEPS_PER_CALL
        hi = last if last is not None else STEPS_PER_CALL * (calls - 1)
        report_file(snapshots, metrics, lo, hi, threads, as_json)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run a command and snapshot its processes as its metrics files grow")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--watch", required=True, help="glob of the run's metrics.jsonl files (** allowed)")
    rec.add_argument("--poll", type=float, default=0.02, help="seconds between looks at the files' sizes")
    rec.add_argument("--names", action="store_true", help="Python thread names by py-spy (pauses each process once)")
    rec.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the command")
    rep = sub.add_parser("report", help="CPU per step by process and thread over a window of steps")
    rep.add_argument("snapshots", type=Path)
    rep.add_argument("--from", dest="first", type=int, default=None, help="window starts after this many steps")
    rep.add_argument("--to", dest="last", type=int, default=None, help="window ends after this many steps")
    rep.add_argument("--threads", type=int, default=6, help="busiest threads shown per process")
    rep.add_argument("--json", action="store_true", help="one JSON line per metrics file: CPU-ms a step by kind")
    args = parser.parse_args()
    if args.command == "record":
        command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        sys.exit(record(args.out, args.watch, command, args.poll, args.names))
    report(args.snapshots, args.first, args.last, args.threads, args.json)


if __name__ == "__main__":
    main()
