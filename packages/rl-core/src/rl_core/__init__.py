"""rl-core: torch-only algorithms for RL post-training, the sample schema and the TaskGraph types."""

from rl_core._errors import DuplicateNameError, RLCoreError, ShapeError, UnknownNameError
from rl_core._lazy import lazy_exports
from rl_core._plugins import PLUGIN_GROUP, PluginError, load_plugins
from rl_core._registry import lookup, nearest_name, registrar
from rl_core._spec import import_from_spec
from rl_core._validation import as_bool_mask, check_tensor
from rl_core.schema import SAMPLE_FIELDS, FieldSpec, check_sample

__version__ = "0.1.0"

__all__ = [
    "PLUGIN_GROUP",
    "SAMPLE_FIELDS",
    "DuplicateNameError",
    "FieldSpec",
    "PluginError",
    "RLCoreError",
    "ShapeError",
    "UnknownNameError",
    "__version__",
    "as_bool_mask",
    "check_sample",
    "check_tensor",
    "import_from_spec",
    "lazy_exports",
    "load_plugins",
    "lookup",
    "nearest_name",
    "registrar",
]
