"""rl-coordinator: data movement by reference between pipeline stages, length balancing and loading."""

from rl_coordinator._errors import CoordinatorError

__version__ = "0.1.0"

__all__ = ["CoordinatorError", "__version__"]
