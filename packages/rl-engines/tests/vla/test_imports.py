"""The vla subpackage's public names are pinned."""

from __future__ import annotations

import rl_engines.vla as vla

PUBLIC_API = [
    "MODEL_TYPE",
    "OPENVLA_MODEL_TYPE",
    "TOKENIZER_FILE",
    "ActionTokenizer",
    "InstructionEncoder",
    "OpenVLAActions",
    "OpenVLAPrompt",
    "OpenVLASpec",
    "TinyVLAConfig",
    "TinyVLAForActionChunking",
    "VLAError",
    "VLAPolicy",
    "WordInstructions",
    "WordTokenizer",
    "action_log_probs",
    "check_policy_matches_env",
    "instruction_encoder",
    "is_openvla_folder",
    "load_openvla",
    "normalize",
    "prismatic_pixels",
    "read_openvla_spec",
    "unnormalize",
]


def test_public_api_is_pinned() -> None:
    assert sorted(vla.__all__) == sorted(PUBLIC_API)
    for name in vla.__all__:
        assert hasattr(vla, name), name
