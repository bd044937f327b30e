"""The unbiased pass@k estimator of Chen et al. (2021), "Evaluating Large Language Models Trained on Code"."""

from __future__ import annotations

from math import comb


def pass_at_k(num_samples: int, num_correct: int, k: int) -> float:
    """The probability that at least one of `k` responses drawn without replacement from `num_samples`
    responses, `num_correct` of them correct, is correct: `1 - C(n - c, k) / C(n, k)`."""
    if not 1 <= k <= num_samples:
        raise ValueError(f"k must lie in [1, num_samples={num_samples}], got k={k}")
    if not 0 <= num_correct <= num_samples:
        raise ValueError(f"num_correct must lie in [0, num_samples={num_samples}], got {num_correct}")
    return 1.0 - comb(num_samples - num_correct, k) / comb(num_samples, k)
