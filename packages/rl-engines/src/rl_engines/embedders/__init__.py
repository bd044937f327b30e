"""Learned video embedders for SRPO's progress reward, registered in `rl_core.envs.VIDEO_EMBEDDERS` on import.

"vjepa2": `transformers.VJEPA2Model` from a local folder (the weight-free "pixel_pyramid" default and the
"privileged_state" oracle live in rl-core).
"""

from rl_engines.embedders._vjepa2 import VJEPA2Embedder, make_vjepa2

__all__ = ["VJEPA2Embedder", "make_vjepa2"]
