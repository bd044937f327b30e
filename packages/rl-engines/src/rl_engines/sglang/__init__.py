"""`SGLangEngine`: SGLang's offline `sglang.Engine` behind the `InferenceEngine` protocol (`rl-engines[sglang]`).

GPU only; sglang is imported when an engine is built, never at import of this module. To drive an SGLang
*server* instead, use `rl_engines.remote.RemoteEngine`.
"""

from rl_engines.sglang._config import SGLangEngineConfig
from rl_engines.sglang._engine import SGLangEngine, import_sglang

__all__ = ["SGLangEngine", "SGLangEngineConfig", "import_sglang"]
