"""A vision-language-action policy for embodied RL.

`TinyVLAForActionChunking` (a conv-stem + transformer VLA with an OFT-style parallel action-chunk head, loadable
by the FSDP2/ddp train engine from a folder whose config has `model_type: tiny_vla`), `action_log_probs`
(restricted softmax over the action bins at the sampling temperature), OpenVLA's `ActionTokenizer`, a
`WordTokenizer` for closed instruction vocabularies, `instruction_encoder` (a VLA folder's instruction tokenizer,
either kind), `check_policy_matches_env`, and `VLAPolicy`, the rollout side
that samples action chunks and receives the actor's weights through `rl_engines.sync`. The OpenVLA-OFT path
(`load_openvla`, `OpenVLAActions`, `OpenVLAPrompt`, `OpenVLASpec`) runs a real Prismatic checkpoint folder
(`model_type: openvla`) through the same log-probs, policy and train engine.
"""

from rl_engines.vla._action_tokenizer import ActionTokenizer, normalize, unnormalize
from rl_engines.vla._config import MODEL_TYPE, TinyVLAConfig
from rl_engines.vla._env_check import check_policy_matches_env
from rl_engines.vla._errors import VLAError
from rl_engines.vla._instructions import InstructionEncoder, WordInstructions, instruction_encoder
from rl_engines.vla._logprobs import action_log_probs
from rl_engines.vla._model import TinyVLAForActionChunking
from rl_engines.vla._openvla import OpenVLAActions, OpenVLAPrompt, is_openvla_folder, load_openvla
from rl_engines.vla._openvla_spec import OPENVLA_MODEL_TYPE, OpenVLASpec, prismatic_pixels, read_openvla_spec
from rl_engines.vla._policy import VLAPolicy
from rl_engines.vla._word_tokenizer import TOKENIZER_FILE, WordTokenizer

__all__ = [
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
