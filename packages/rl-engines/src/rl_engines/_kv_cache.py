"""The keyword under which a transformers model's forward takes its KV cache, which transformers renamed."""

from __future__ import annotations

import functools
import inspect

_CACHE_ARG = "cache"
_LEGACY_CACHE_ARG = "past_key_values"
"""transformers 5.24 renamed the forward's KV-cache argument to `cache` and warns on the old name; older releases
(down to our floor) know only the old one."""


@functools.cache
def cache_arg(model_type: type) -> str:
    """The name under which `model_type`'s forward takes its KV cache."""
    parameters = inspect.signature(model_type.forward).parameters
    return _CACHE_ARG if _CACHE_ARG in parameters else _LEGACY_CACHE_ARG
