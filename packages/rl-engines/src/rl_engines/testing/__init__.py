"""The `InferenceEngine` conformance suite: every rollout engine passes it; and doubles for training tests.

Subclass `InferenceEngineConformance` in a test module and implement `make_engine(models)`; or call the
`check_*` functions with a `Harness` from your own tests. The tiny models (`TinyModelSpec`,
`ConformanceModels`) are built in code and saved as HF checkpoints; references are plain transformers.

Tests of a `TrainEngine` or of the roles around one (rl-engines' and rl-runtime's) share `tiny_engine_config`
(a CPU engine on `tiny_qwen_config`), `tiny_rollout_batch` / `with_ppo_fields` and `ppo_loss_fn`.
"""

from rl_engines.testing._checks_async import check_agenerate_concurrent, check_cancel, check_submit_errors
from rl_engines.testing._checks_generate import (
    check_bad_input,
    check_concurrent_order,
    check_greedy_matches_reference,
    check_logprobs_match_forward,
    check_seeds,
    check_stop_token,
)
from rl_engines.testing._checks_lifecycle import (
    check_abort_rids,
    check_pause_abort,
    check_pause_keep_across_update,
    check_pause_wait,
    check_sleep_wake,
)
from rl_engines.testing._checks_weights import (
    check_partial_update,
    check_prefix_cache_flushed,
    check_repeated_shared_memory_syncs,
    check_transports_v1_to_v2,
    check_unversioned_weights_refused,
    check_update_errors,
)
from rl_engines.testing._harness import TRANSPORT_CAPABILITY, Harness, expect
from rl_engines.testing._models import (
    ConformanceModels,
    TinyModelSpec,
    greedy_mismatch,
    reference_greedy,
    reference_logprobs,
)
from rl_engines.testing._process_engine import ProcessEngine
from rl_engines.testing._suite import InferenceEngineConformance
from rl_engines.testing._training import (
    TINY_PROMPT_LEN,
    TINY_RESPONSE_LEN,
    TINY_VOCAB,
    ppo_loss_fn,
    tiny_engine_config,
    tiny_qwen_config,
    tiny_rollout_batch,
    with_ppo_fields,
)

__all__ = [
    "TINY_PROMPT_LEN",
    "TINY_RESPONSE_LEN",
    "TINY_VOCAB",
    "TRANSPORT_CAPABILITY",
    "ConformanceModels",
    "Harness",
    "InferenceEngineConformance",
    "ProcessEngine",
    "TinyModelSpec",
    "check_abort_rids",
    "check_agenerate_concurrent",
    "check_bad_input",
    "check_cancel",
    "check_concurrent_order",
    "check_greedy_matches_reference",
    "check_logprobs_match_forward",
    "check_partial_update",
    "check_pause_abort",
    "check_pause_keep_across_update",
    "check_pause_wait",
    "check_prefix_cache_flushed",
    "check_repeated_shared_memory_syncs",
    "check_seeds",
    "check_sleep_wake",
    "check_stop_token",
    "check_submit_errors",
    "check_transports_v1_to_v2",
    "check_unversioned_weights_refused",
    "check_update_errors",
    "expect",
    "greedy_mismatch",
    "ppo_loss_fn",
    "reference_greedy",
    "reference_logprobs",
    "tiny_engine_config",
    "tiny_qwen_config",
    "tiny_rollout_batch",
    "with_ppo_fields",
]
