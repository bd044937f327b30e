"""`python -m rl_engines.server --model <dir | config.json> [--port N] [--api-key KEY] [--tokenizer DIR]`: serve an
HFEngine over HTTP (SGLang's native routes; OpenAI's `/v1/chat/completions` and `/v1/completions` with a tokenizer)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rl_engines import load_tokenizer
from rl_engines.remote import API_KEY_ENV
from rl_engines.remote._config import resolve_api_key
from rl_engines.rollout import HFEngineConfig
from rl_engines.server._auth import bind_problem
from rl_engines.server._config import DEFAULT_HOST, DEFAULT_MAX_REQUEST_BYTES, ServerConfig
from rl_engines.server._model import build_hf_engine
from rl_engines.server._run import serve


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rl_engines.server", description=__doc__)
    parser.add_argument("--model", required=True, help="HF checkpoint directory, or a config JSON (random weights)")
    parser.add_argument(
        "--tokenizer",
        default=None,
        help="tokenizer folder for the OpenAI routes (default: the --model folder when it holds tokenizer files)",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="bind address (default loopback only)")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--max-request-bytes", type=int, default=DEFAULT_MAX_REQUEST_BYTES)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--weight-version", type=int, default=0, help="policy version of the weights served at start")
    parser.add_argument("--context-len", type=int, default=None)
    parser.add_argument("--max-batch-size", type=int, default=256)
    parser.add_argument("--prefill-cache-size", type=int, default=0)
    parser.add_argument("--timeout-s", type=float, default=600.0, help="admission and drain timeouts")
    parser.add_argument("--seed", type=int, default=0, help="seeds random weights (config JSON) and sampling")
    parser.add_argument("--incremental-stream", action="store_true", help="stream deltas instead of cumulative")
    parser.add_argument(
        "--api-key",
        default=None,
        help=f"require 'Authorization: Bearer KEY' on every route but /health (default: ${API_KEY_ENV}, else none)",
    )
    parser.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="serve on a non-loopback --host without an API key (refused otherwise: anyone could replace weights)",
    )
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument(
        "--parent-pid", type=int, default=None, help="exit (as on SIGTERM) once this process is no longer the parent"
    )
    return parser


_PARENT_POLL_S = 1.0
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def _tokenizer(args: argparse.Namespace) -> Any | None:
    """The tokenizer `--tokenizer` names, else the `--model` folder's, else None (no OpenAI routes)."""
    if args.tokenizer is not None:
        return load_tokenizer(args.tokenizer)
    model = Path(args.model)
    if model.is_dir() and any((model / name).is_file() for name in _TOKENIZER_FILES):
        return load_tokenizer(model)
    logging.getLogger(__name__).info("no tokenizer in %s: the OpenAI routes answer 501 (pass --tokenizer)", model)
    return None


def _exit_with_parent(parent_pid: int) -> None:
    """Send this process SIGTERM (a clean uvicorn shutdown) once `parent_pid` is no longer its parent: a server a
    trainer worker started must not outlive the worker, even one that was killed."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(_PARENT_POLL_S)
        logging.getLogger(__name__).warning("parent process %d is gone; shutting down", parent_pid)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, configure logging, build the engine and serve until interrupted."""
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    api_key = resolve_api_key(args.api_key)
    problem = bind_problem(args.host, api_key, args.allow_unauthenticated)
    if problem is not None:
        # Refuse before the model is built: a wrong start costs nothing.
        parser.exit(2, f"error: {problem}\n")
    if args.parent_pid is not None:
        _exit_with_parent(args.parent_pid)
    engine_config = HFEngineConfig(
        dtype=args.dtype,
        device=args.device,
        context_len=args.context_len,
        max_batch_size=args.max_batch_size,
        prefill_cache_size=args.prefill_cache_size,
        admission_timeout_s=args.timeout_s,
        drain_timeout_s=args.timeout_s,
        initial_version=args.weight_version,
        seed=args.seed,
    )
    tokenizer = _tokenizer(args)
    engine = build_hf_engine(args.model, engine_config, seed=args.seed)
    config = ServerConfig(
        host=args.host,
        port=args.port,
        max_request_bytes=args.max_request_bytes,
        incremental_stream=args.incremental_stream,
        model_path=args.model,
        api_key=api_key,
        allow_unauthenticated=args.allow_unauthenticated,
    )
    serve(engine, config, tokenizer=tokenizer)


if __name__ == "__main__":
    main()
