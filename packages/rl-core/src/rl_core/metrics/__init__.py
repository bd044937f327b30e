"""verl's data metrics of one step's batch (verl 0.9.1, `verl/trainer/ppo/metric_utils.py`), so runs compare across
frameworks: pure torch functions of the sample-schema tensors, beside the schema and the checks they use.

    metrics = compute_data_metrics(batch, max_prompt_length=512, max_response_length=1024)
    metrics["perf/total_num_tokens"] = float(count_tokens(batch))

`batch` maps the `rl_core.schema` names to tensors (`token_level_scores`, `advantages`, `response_mask`, ...).
Where the metrics go (sinks, the cross-rank reduction) is rl-runtime's `rl_runtime.metrics`.
"""

from rl_core.metrics._batch import sequence_lengths, token_counts
from rl_core.metrics._data import compute_data_metrics, count_tokens
from rl_core.metrics._errors import MetricsError

__all__ = ["MetricsError", "compute_data_metrics", "count_tokens", "sequence_lengths", "token_counts"]
