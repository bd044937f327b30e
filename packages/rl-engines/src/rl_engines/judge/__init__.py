"""A generative judge: a rollout engine grades each response from a prompt template, and the verdict (yes/no or a
number, found by a regular expression) becomes its score; answers without a verdict score a default and are
counted. The run config's `judge` section is `JudgeConfig` as it is; the runtime's reward node adds the scores."""

from rl_engines.judge._config import (
    DEFAULT_TEMPLATE,
    NUMBER_PATTERN,
    YES_NO_PATTERN,
    JudgeConfig,
    JudgeEngine,
    VerdictKind,
)
from rl_engines.judge._judge import GenerativeJudge, JudgeScores, parse_verdict

__all__ = [
    "DEFAULT_TEMPLATE",
    "NUMBER_PATTERN",
    "YES_NO_PATTERN",
    "GenerativeJudge",
    "JudgeConfig",
    "JudgeEngine",
    "JudgeScores",
    "VerdictKind",
    "parse_verdict",
]
