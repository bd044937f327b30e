"""Accepted requests/s of the rollout server with and without `--api-key`, same build, alternating windows.

Two servers of the same working tree serve the same tiny model (`rl_engines.testing.ConformanceModels`) on
127.0.0.1: one started with `--api-key`, one without. At each concurrency level, windows alternate (open, keyed,
keyed, open, ...) so drift hits both sides alike; each window keeps `concurrency` clients posting greedy
`/generate` calls of `--new-tokens` tokens (the keyed side sends `Authorization: Bearer <key>`) for `--seconds`
and counts the 200 answers. Before measuring, the keyed server is checked to answer 401 without the key.
Each pair of adjacent windows gives one keyed/open ratio (drift between pairs cancels); a level reports the median
of its pairs and their spread (interquartile range, min..max), and the RESULT line's ratio is the median over every
pair of every level; goal >= 0.95. One untimed full-length window per side warms each level up first. The load
average before and after is printed: on a shared machine a spread wider than the distance to the goal means the
run says nothing either way, so rerun it quieter or with more `--rounds`.

    python bench/server_auth.py          # ~3.5 min on 2 cores; --help for the options
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from rl_engines.server._auth import _authorized
from rl_engines.sync import free_port
from rl_engines.testing import ConformanceModels

GOAL = 0.95
PROMPT = [5, 17, 42, 9, 77]
STARTUP_S = 180.0


class _Server:
    """`python -m rl_engines.server` on 127.0.0.1 until `stop()`."""

    def __init__(self, model: Path, api_key: str | None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.headers = {} if api_key is None else {"Authorization": f"Bearer {api_key}"}
        command = [sys.executable, "-m", "rl_engines.server", "--model", str(model), "--port", str(self.port)]
        # `--api-key=KEY`, one token: a random key may start with "-", which argparse would take for an option.
        command += ["--log-level", "WARNING", *([] if api_key is None else [f"--api-key={api_key}"])]
        # One torch thread each: two servers and the clients share 2 cores, and spinning OpenMP threads of an idle
        # server had stretched single requests from ~10 ms to ~500 ms.
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + STARTUP_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server was not healthy within {STARTUP_S} s")
            time.sleep(0.2)

    def stop(self) -> None:
        """Terminate (then kill) and reap the server."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


async def _window(server: _Server, concurrency: int, seconds: float, new_tokens: int) -> float:
    """Accepted (HTTP 200) requests/s with `concurrency` clients posting back to back for `seconds`."""
    body = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": new_tokens, "temperature": 0.0}}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    accepted = 0
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=60.0, limits=limits) as http:
        deadline = time.perf_counter() + seconds

        async def client() -> None:
            nonlocal accepted
            while time.perf_counter() < deadline:
                if (await http.post("/generate", json=body)).status_code == 200:
                    accepted += 1

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        return accepted / (time.perf_counter() - start)


def _check_key_is_enforced(keyed: _Server) -> None:
    body = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 1}}
    refused = httpx.post(f"{keyed.url}/generate", json=body, timeout=30.0)
    wrong = httpx.post(f"{keyed.url}/generate", json=body, headers={"Authorization": "Bearer no"}, timeout=30.0)
    accepted = httpx.post(f"{keyed.url}/generate", json=body, headers=keyed.headers, timeout=30.0)
    if (refused.status_code, wrong.status_code, accepted.status_code) != (401, 401, 200):
        raise RuntimeError(f"key not enforced: {refused.status_code}, {wrong.status_code}, {accepted.status_code}")


def _check_cost_us(key: str) -> float:
    """µs per call of the middleware's header check on a request's typical headers (the keyed side's only extra
    work): a bound on the slowdown that the machine's load cannot blur."""
    headers = [(b"host", b"127.0.0.1"), (b"accept", b"*/*"), (b"content-type", b"application/json")]
    headers.append((b"authorization", f"Bearer {key}".encode()))
    expected = f"Bearer {key}".encode()
    calls = 200_000
    start = time.perf_counter()
    for _ in range(calls):
        _authorized(headers, expected)
    return (time.perf_counter() - start) / calls * 1e6


def _spread(ratios: list[float]) -> str:
    """Median, interquartile range and extremes of `ratios`, as one line."""
    low, _, high = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else ratios * 3
    return (
        f"median {statistics.median(ratios):.3f}  IQR {low:.3f}..{high:.3f}  "
        f"min..max {min(ratios):.3f}..{max(ratios):.3f}  ({len(ratios)} pairs)"
    )


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32], help="client counts")
    parser.add_argument("--rounds", type=int, default=10, help="windows per side and concurrency (alternating)")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one window")
    parser.add_argument("--new-tokens", type=int, default=2, help="greedy tokens per request")
    args = parser.parse_args()
    print(f"before: {_load()}")
    with tempfile.TemporaryDirectory(prefix="server-auth-") as root:
        model = ConformanceModels.create(root).v1_dir
        key = secrets.token_urlsafe(32)
        servers = {"open": _Server(model, None), "keyed": _Server(model, key)}
        try:
            _check_key_is_enforced(servers["keyed"])
            ratios: list[float] = []
            for concurrency in args.concurrency:
                rates: dict[str, list[float]] = {"open": [], "keyed": []}
                for side in ["open", "keyed"]:  # one untimed warm-up window each
                    asyncio.run(_window(servers[side], concurrency, args.seconds, args.new_tokens))
                for index in range(args.rounds):
                    order = ["open", "keyed"] if index % 2 == 0 else ["keyed", "open"]
                    for side in order:
                        rates[side].append(
                            asyncio.run(_window(servers[side], concurrency, args.seconds, args.new_tokens))
                        )
                pairs = [keyed / open_ for open_, keyed in zip(rates["open"], rates["keyed"], strict=True)]
                ratios += pairs
                print(
                    f"concurrency {concurrency:3d}: open {statistics.median(rates['open']):7.1f} req/s  keyed "
                    f"{statistics.median(rates['keyed']):7.1f} req/s  keyed/open {_spread(pairs)}"
                )
                windows = {side: [round(rate) for rate in rates[side]] for side in rates}
                print(f"    windows open {windows['open']}, keyed {windows['keyed']}")
        finally:
            for server in servers.values():
                server.stop()
    print(f"after: {_load()}")
    print(f"keyed/open over every level: {_spread(ratios)}")
    cost = _check_cost_us(key)
    print(f"the key check costs {cost:.2f} us per request (in-process, one thread)")
    ratio = statistics.median(ratios)
    verdict = "met" if ratio >= GOAL else "missed"
    print(f"RESULT server_auth keyed_vs_open={ratio:.3f} ratio={ratio:.3f} goal={GOAL} {verdict}")


if __name__ == "__main__":
    main()
