"""Building the generative judge of a run: its engine (this worker's rollout engine or a server) and tokenizer."""

from __future__ import annotations

from pathlib import Path

from rl_engines.judge import GenerativeJudge, JudgeConfig, JudgeEngine
from rl_engines.reward_model import load_reward_tokenizer, policy_tokenizer_folder
from rl_engines.rollout import InferenceEngine
from rl_engines.training import ModelConfig
from rl_runtime.trainer._errors import TrainerError


def judge_tokenizer_folder(section: JudgeConfig, policy: ModelConfig) -> Path:
    """The judge model's tokenizer folder: `judge.tokenizer`, else the policy's; a TrainerError naming the field when
    neither exists (checked in the driver before any worker starts)."""
    folder = Path(section.tokenizer) if section.tokenizer is not None else policy_tokenizer_folder(policy)
    if folder is None or not folder.is_dir():
        raise TrainerError(
            f"judge.tokenizer: expected the judge model's tokenizer folder, found {section.tokenizer!r} and the policy "
            "has no tokenizer folder (actor.model.tokenizer_path or a model folder holding one); set judge.tokenizer"
        )
    return folder


def build_judge(section: JudgeConfig, policy: ModelConfig, rollout: InferenceEngine | None) -> GenerativeJudge:
    """The judge on `rollout` (engine=rollout) or on a `RemoteEngine` of `judge.base_url` (engine=server)."""
    tokenizer = load_reward_tokenizer(judge_tokenizer_folder(section, policy))
    if section.engine is JudgeEngine.SERVER:
        from rl_engines.remote import RemoteEngine, RemoteEngineConfig

        assert section.base_url is not None, "JudgeConfig refuses engine=server without base_url"
        return GenerativeJudge(RemoteEngine(RemoteEngineConfig(section.base_url)), tokenizer, section)
    if rollout is None:
        raise TrainerError(
            "judge.engine=rollout: this worker runs the reward node but holds no rollout engine; keep the reward node "
            "in the rollout part of the pipeline, or set judge.engine=server"
        )
    return GenerativeJudge(rollout, tokenizer, section)
