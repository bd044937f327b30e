"""`RemoteEngine`: an `InferenceEngine` client of SGLang's native HTTP protocol, plus that protocol's wire format.

`RemoteEngine(RemoteEngineConfig(base_url))` drives our rollout server (`rl_engines.server`) or a real SGLang
server; `ServerFleet` balances requests over several servers (the trainer's "server" engine, built by
`build_server_fleet`), and `LocalServer` starts one of ours as a child process. The wire helpers (`/generate`
JSON both ways, named tensors as shared-memory / CUDA IPC handles, typed errors as HTTP answers) are shared with
the server. httpx comes with the `rl-engines[server]` extra.
"""

from rl_engines.remote._build import ServerEngineConfig, build_server_fleet
from rl_engines.remote._config import API_KEY_ENV, SGLANG_CAPABILITIES, RemoteEngineConfig
from rl_engines.remote._engine import RemoteEngine
from rl_engines.remote._errors import (
    ERROR_TYPES,
    AuthenticationError,
    PayloadTooLargeError,
    ProtocolError,
    RemoteError,
    ServerConnectionError,
    error_from_response,
    status_for,
)
from rl_engines.remote._fleet import ServerFleet
from rl_engines.remote._fleet_sync import FleetWeightSync
from rl_engines.remote._launch import LocalServer, ServerStartError
from rl_engines.remote._wire_generate import (
    finish_reason_json,
    generate_output_json,
    generate_payload,
    logprob_pairs,
    output_from_json,
    output_to_json,
    parse_generate_payload,
    sampling_from_json,
    sampling_to_json,
)
from rl_engines.remote._wire_tensors import deserialize_named_tensors, serialize_named_tensors

__all__ = [
    "API_KEY_ENV",
    "ERROR_TYPES",
    "SGLANG_CAPABILITIES",
    "AuthenticationError",
    "FleetWeightSync",
    "LocalServer",
    "PayloadTooLargeError",
    "ProtocolError",
    "RemoteEngine",
    "RemoteEngineConfig",
    "RemoteError",
    "ServerConnectionError",
    "ServerEngineConfig",
    "ServerFleet",
    "ServerStartError",
    "build_server_fleet",
    "deserialize_named_tensors",
    "error_from_response",
    "finish_reason_json",
    "generate_output_json",
    "generate_payload",
    "logprob_pairs",
    "output_from_json",
    "output_to_json",
    "parse_generate_payload",
    "sampling_from_json",
    "sampling_to_json",
    "serialize_named_tensors",
    "status_for",
]
