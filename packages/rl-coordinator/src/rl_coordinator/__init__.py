"""rl-coordinator: data movement by reference between pipeline stages, length balancing and loading."""

from rl_coordinator._errors import CoordinatorError, CoordinatorInputError, CoordinatorTimeout
from rl_coordinator._sample_info import SampleInfo

__version__ = "0.1.0"

__all__ = ["CoordinatorError", "CoordinatorInputError", "CoordinatorTimeout", "SampleInfo", "__version__"]
