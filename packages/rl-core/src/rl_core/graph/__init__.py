"""TaskGraph types: immutable nodes, validated DAGs, the pipeline builder, built-ins and the graph splitter.

Pure data and standard library only (no torch), so a planner or config loader can use it anywhere;
executors are bound to nodes by operation name in rl-runtime.
"""

from rl_core.graph._builtin import (
    BUILTIN_OPERATIONS,
    EMBODIED_OPERATIONS,
    KL_IN_REWARD_PIPELINES,
    PIPELINES,
    get_pipeline,
    register_kl_in_reward_pipeline,
    register_pipeline,
)
from rl_core.graph._errors import (
    CycleError,
    DuplicateGraphError,
    DuplicateNodeError,
    GraphError,
    GraphSpecError,
    UnknownDependencyError,
)
from rl_core.graph._node import Node, NodeRole
from rl_core.graph._params import PARAM_COUNT_KEY
from rl_core.graph._pipeline import Pipeline
from rl_core.graph._plan import split_plan, validate_plan
from rl_core.graph._split import (
    ROLLOUT_ROLES,
    CrossDependency,
    SplitResult,
    SplitRule,
    is_irreducible,
    split_graph,
)
from rl_core.graph._task_graph import TaskGraph
from rl_core.graph._weight import estimate_weight

__all__ = [
    "BUILTIN_OPERATIONS",
    "EMBODIED_OPERATIONS",
    "KL_IN_REWARD_PIPELINES",
    "PARAM_COUNT_KEY",
    "PIPELINES",
    "ROLLOUT_ROLES",
    "CrossDependency",
    "CycleError",
    "DuplicateGraphError",
    "DuplicateNodeError",
    "GraphError",
    "GraphSpecError",
    "Node",
    "NodeRole",
    "Pipeline",
    "SplitResult",
    "SplitRule",
    "TaskGraph",
    "UnknownDependencyError",
    "estimate_weight",
    "get_pipeline",
    "is_irreducible",
    "register_kl_in_reward_pipeline",
    "register_pipeline",
    "split_graph",
    "split_plan",
    "validate_plan",
]
