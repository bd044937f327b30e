"""A test double of an OpenVLA-OFT checkpoint folder: tiny, random, and NOT OpenVLA.

`write_fake_openvla(folder)` writes what the OpenVLA-OFT path reads from a real checkpoint: `config.json` with
`model_type: openvla` and an `auto_map` to remote code, that code (`FakePrismatic*`: a conv patch embedding in place
of the timm ViTs, a linear projector, and a real transformers `LlamaForCausalLM` as `language_model`, so the
Prismatic interface the path calls is the real one), `preprocessor_config.json`, `dataset_statistics.json`, a
word-level tokenizer with `<s>`, `</s>` and the empty piece, and random safetensors weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

IMAGE_SIZE = 28  # 2 x 2 patches of 14 pixels
BASE_VOCAB = 320  # tokenizer vocabulary; the last 256 ids are the action tokens
PAD_TO = 64
BINS = 256
CHUNK, DIMS = 2, 7
Q01 = [-0.5, -0.4, -0.3, -0.2, -0.1, -0.05, 0.0]
Q99 = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0]
MASK = [True] * 6 + [False]

_CONFIG_CODE = '''
from transformers import AutoConfig, PretrainedConfig


class FakePrismaticConfig(PretrainedConfig):
    """Test double of Prismatic's OpenVLAConfig (only the fields the OpenVLA-OFT path reads)."""

    model_type = "openvla"
    sub_configs = {"text_config": AutoConfig}

    def __init__(self, text_config=None, n_action_bins=256, pad_to_multiple_of=64, image_size=28,
                 use_fused_vision_backbone=True, norm_stats=None, **kwargs):
        if isinstance(text_config, dict):
            text_config = AutoConfig.for_model(**text_config)
        self.text_config = text_config
        self.n_action_bins = n_action_bins
        self.pad_to_multiple_of = pad_to_multiple_of
        self.image_size = image_size
        self.use_fused_vision_backbone = use_fused_vision_backbone
        self.norm_stats = norm_stats
        super().__init__(**kwargs)
'''

_MODEL_CODE = '''
import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from .configuration_fake_prismatic import FakePrismaticConfig


class FakeVisionBackbone(torch.nn.Module):
    """Stands in for the fused DINOv2 + SigLIP timm ViTs: 14-pixel patches of the 6 stacked channels."""

    def __init__(self, channels, width):
        super().__init__()
        self.patchify = torch.nn.Conv2d(channels, width, kernel_size=14, stride=14)

    def forward(self, pixel_values):
        return self.patchify(pixel_values).flatten(2).transpose(1, 2)


class FakePrismaticProjector(torch.nn.Module):
    def __init__(self, vision_dim, llm_dim):
        super().__init__()
        self.fc1 = torch.nn.Linear(vision_dim, llm_dim)
        self.fc2 = torch.nn.Linear(llm_dim, llm_dim)

    def forward(self, patches):
        return self.fc2(torch.nn.functional.gelu(self.fc1(patches)))


class FakePrismaticForActionPrediction(PreTrainedModel):
    """Test double of OpenVLAForActionPrediction: the same submodule names and input embeddings."""

    config_class = FakePrismaticConfig
    base_model_prefix = "model"
    _no_split_modules = ["FakePrismaticProjector"]
    _supports_sdpa = True

    def __init__(self, config):
        super().__init__(config)
        width = 16
        self.vision_backbone = FakeVisionBackbone(6 if config.use_fused_vision_backbone else 3, width)
        self.projector = FakePrismaticProjector(width, config.text_config.hidden_size)
        self.language_model = AutoModelForCausalLM.from_config(config.text_config)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (torch.nn.Linear, torch.nn.Conv2d, torch.nn.Embedding)):
            torch.nn.init.normal_(module.weight, std=0.2)
            if getattr(module, "bias", None) is not None:
                torch.nn.init.normal_(module.bias, std=0.2)

    def get_input_embeddings(self):
        return self.language_model.get_input_embeddings()
'''


def _tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = ["<unk>", "<s>", "</s>", "\u2581", "In:", "What", "action", "should", "the", "robot", "take", "to", "?",
             "Out:", "put", "bowl", "on", "plate", "open", "top", "drawer", "and", "it"]  # fmt: skip
    vocab = {word: index for index, word in enumerate(words)}
    vocab.update({f"<extra_{i}>": i for i in range(len(words), BASE_VOCAB)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    split = [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split("?", "isolated")]
    tok.pre_tokenizer = pre_tokenizers.Sequence(split)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<unk>"
    ).save_pretrained(str(folder))


def write_fake_openvla(folder: Path, seed: int = 0, unnorm_keys: tuple[str, ...] = ("libero_goal_no_noops",)) -> Path:
    """Write the test-double checkpoint into `folder` (created) and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "configuration_fake_prismatic.py").write_text(_CONFIG_CODE)
    (folder / "modeling_fake_prismatic.py").write_text(_MODEL_CODE)
    text = {
        "model_type": "llama",
        "vocab_size": BASE_VOCAB + PAD_TO,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 128,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
    }
    stats = {"q01": Q01, "q99": Q99, "mask": MASK, "mean": [0.0] * DIMS, "std": [1.0] * DIMS}
    norm_stats = {key: {"action": stats} for key in unnorm_keys}
    config = {
        "model_type": "openvla",
        "architectures": ["FakePrismaticForActionPrediction"],
        "auto_map": {
            "AutoConfig": "configuration_fake_prismatic.FakePrismaticConfig",
            "AutoModelForVision2Seq": "modeling_fake_prismatic.FakePrismaticForActionPrediction",
        },
        "text_config": text,
        "n_action_bins": BINS,
        "pad_to_multiple_of": PAD_TO,
        "image_size": IMAGE_SIZE,
        "use_fused_vision_backbone": True,
        "norm_stats": norm_stats,
    }
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    (folder / "dataset_statistics.json").write_text(json.dumps(norm_stats, indent=1))
    (folder / "rl_vla.json").write_text(json.dumps({"chunk_size": CHUNK, "action_dims": DIMS}))
    size = [3, IMAGE_SIZE, IMAGE_SIZE]
    (folder / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "use_fused_vision_backbone": True,
                "image_resize_strategy": "resize-naive",
                "input_sizes": [size, size],
                "interpolations": ["bicubic", "bicubic"],
                "means": [[0.485, 0.456, 0.406], [0.5, 0.5, 0.5]],
                "stds": [[0.229, 0.224, 0.225], [0.5, 0.5, 0.5]],
            }
        )
    )
    _tokenizer(folder)
    _weights(folder, seed)
    # save_pretrained rewrote config.json from the class; put the folder's own back (auto_map, model_type).
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    return folder


def _weights(folder: Path, seed: int) -> None:
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    config_cls = get_class_from_dynamic_module(
        "configuration_fake_prismatic.FakePrismaticConfig", str(folder), local_files_only=True
    )
    model_cls = get_class_from_dynamic_module(
        "modeling_fake_prismatic.FakePrismaticForActionPrediction", str(folder), local_files_only=True
    )
    config = config_cls.from_pretrained(str(folder))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
    model.save_pretrained(str(folder))
