"""`FastDecoder` computes transformers' decode step for the families it takes, and refuses the others."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    DynamicCache,
    GemmaConfig,
    LlamaConfig,
    MistralConfig,
    PretrainedConfig,
    Qwen2Config,
    Qwen3Config,
)

from rl_engines._kv_cache import cache_arg
from rl_engines.rollout import HFEngine, HFEngineConfig
from rl_engines.rollout._decode_step import FastStep, ModelStep, SharedRows
from rl_engines.rollout._fast_decode import INITIAL_DECODE_COLUMNS, FastDecoder, PrefillKV
from rl_engines.testing import Harness

VOCAB = 97
STEPS = 6
LOGIT_TOL = {torch.float32: 1e-5, torch.bfloat16: 5e-2}
_SIZES = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One intra-op thread: with several, a GEMM splits its rows between threads, and a row's rounding depends on
    the share it falls in (so on the batch around it, shared rows or not)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _model(config: PretrainedConfig, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).to(dtype).eval()
    with torch.no_grad():  # random biases and norm gains so that each term of the layer shows in the logits
        for name, parameter in model.named_parameters():
            if name.endswith(("bias", "norm.weight", "layernorm.weight")):
                parameter.add_(torch.randn_like(parameter) * 0.5)
    return model


SUPPORTED = {
    "llama-tied": lambda: LlamaConfig(**_SIZES, tie_word_embeddings=True),
    "llama-biases": lambda: LlamaConfig(**_SIZES, attention_bias=True, mlp_bias=True),
    "llama3-rope": lambda: LlamaConfig(
        **_SIZES,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16,
        },
    ),
    "qwen2": lambda: Qwen2Config(**_SIZES),
    "qwen3": lambda: Qwen3Config(**_SIZES, head_dim=16),
    "mistral": lambda: MistralConfig(**_SIZES, sliding_window=None),
}


def _left_padded(prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token ids, 0/1 padding mask and positions `(B, W)` of left-padded prompts."""
    width = max(len(p) for p in prompts)
    ids = torch.zeros((len(prompts), width), dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, prompt in enumerate(prompts):
        ids[i, width - len(prompt) :] = torch.tensor(prompt)
        mask[i, width - len(prompt) :] = 1
    return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


def _prefill(model: torch.nn.Module, prompts: list[list[int]]) -> tuple[DynamicCache, torch.Tensor, torch.Tensor]:
    """Left-padded prompts through the forward: cache, last tokens `(B,)` and padding mask `(B, W)`."""
    ids, mask, positions = _left_padded(prompts)
    cache = DynamicCache(config=model.config)
    kwargs = {cache_arg(type(model)): cache}
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **kwargs)
    return cache, out.logits[:, -1].argmax(-1), mask


def _decode(step: FastStep | ModelStep, tokens: torch.Tensor) -> list[torch.Tensor]:
    """STEPS greedy steps, dropping row 0 after the second; the logits of each step."""
    history = []
    for index in range(STEPS):
        if index == 2:
            keep = torch.arange(1, tokens.shape[0])
            step.select(keep)
            tokens = tokens[keep]
        logits = step(tokens)
        history.append(logits)
        tokens = logits.argmax(-1)
    return history


def _fast_prefill(
    decoder: FastDecoder, prompts: list[list[int]]
) -> tuple[PrefillKV, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Left-padded prompts through `decoder.prefill`: its keys and values, logits `(B, V)`, greedy tokens `(B,)` and
    padding mask `(B, W)`."""
    ids, mask, positions = _left_padded(prompts)
    kv, logits = decoder.prefill(ids, mask, positions)
    return kv, logits, logits.argmax(-1), mask


def _steps(model: torch.nn.Module, prompts: list[list[int]], capacity: int) -> tuple[FastStep, ModelStep, torch.Tensor]:
    """A fast step on the fast prefill and a forward step on the forward's prefill of `prompts`, and the forward
    prefill's greedy tokens."""
    kv, _, _, mask = _fast_prefill(FastDecoder.for_model(model), prompts)
    fast = FastStep(FastDecoder.for_model(model), kv, mask, mask.sum(-1) - 1, capacity)
    cache, tokens, mask = _prefill(model, prompts)
    return fast, ModelStep(model, cache, mask, mask.sum(-1) - 1, boolean_mask=False), tokens


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("family", sorted(SUPPORTED))
@torch.inference_mode()
def test_the_fast_prefill_gives_the_forward_s_cache_and_logits(family: str, dtype: torch.dtype) -> None:
    model = _model(SUPPORTED[family](), dtype)
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14], [15], [17, 18, 19, 20]]
    kv, logits, _, mask = _fast_prefill(FastDecoder.for_model(model), prompts)
    cache, _, _ = _prefill(model, prompts)
    forward_logits = torch.stack([_last_logits(model, p) for p in prompts])
    torch.testing.assert_close(logits.float(), forward_logits, atol=LOGIT_TOL[dtype], rtol=0)
    valid = mask.bool()
    for mine, theirs in zip(kv.keys + kv.values, _layers(cache), strict=True):
        assert mine.shape == theirs.shape
        # Padding positions hold whatever the pad token makes of them; no valid position attends to them.
        torch.testing.assert_close(
            mine.transpose(1, 2)[valid], theirs.transpose(1, 2)[valid], atol=LOGIT_TOL[dtype], rtol=0
        )


def _last_logits(model: torch.nn.Module, prompt: list[int]) -> torch.Tensor:
    return model(input_ids=torch.tensor([prompt])).logits[0, -1].float()


def _layers(cache: DynamicCache) -> list[torch.Tensor]:
    return [layer.keys for layer in cache.layers] + [layer.values for layer in cache.layers]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("family", sorted(SUPPORTED))
@torch.inference_mode()
def test_fast_steps_give_the_logits_of_the_forward(family: str, dtype: torch.dtype) -> None:
    model = _model(SUPPORTED[family](), dtype)
    assert FastDecoder.for_model(model) is not None
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14], [15, 16], [17, 18, 19, 20]]
    fast, reference, tokens = _steps(model, prompts, capacity=7 + STEPS)
    for got, want in zip(_decode(fast, tokens), _decode(reference, tokens), strict=True):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, want, atol=LOGIT_TOL[dtype], rtol=0)


@torch.inference_mode()
def test_the_cache_grows_past_its_first_allocation() -> None:
    model = _model(SUPPORTED["qwen2"]())
    long_run = INITIAL_DECODE_COLUMNS + 10
    fast, reference, tokens = _steps(model, [[3, 4, 5], [6, 7]], capacity=3 + long_run)
    for _ in range(long_run):
        got, want = fast(tokens), reference(tokens)
        torch.testing.assert_close(got, want, atol=LOGIT_TOL[torch.float32], rtol=0)
        tokens = want.argmax(-1)
    assert fast._state.width == 3 + long_run and fast._state.bias.shape[1] == 3 + long_run
    with pytest.raises(ValueError, match="full"):
        fast(tokens)


@torch.inference_mode()
def test_fast_steps_extend_the_cache_the_forward_fills() -> None:
    model = _model(SUPPORTED["qwen2"]())
    cache, tokens, mask = _prefill(model, [[3, 4, 5], [6, 7]])
    fast = FastStep(FastDecoder.for_model(model), PrefillKV(*_split(_layers(cache))), mask, mask.sum(-1) - 1, 8)
    fast(tokens)
    reference, _, _ = _prefill(model, [[3, 4, 5, int(tokens[0])], [6, 7, int(tokens[1])]])
    state = fast._state
    assert state.width == 4
    torch.testing.assert_close(state.keys[1][:, :, :4], reference.layers[1].keys, atol=1e-6, rtol=0)
    torch.testing.assert_close(state.values[1][:, :, :4], reference.layers[1].values, atol=1e-6, rtol=0)
    assert state.bias[1, :4].tolist() == [float("-inf"), 0.0, 0.0, 0.0]


@torch.inference_mode()
def test_rows_that_leave_and_join_reuse_the_cache_in_place() -> None:
    decoder = FastDecoder.for_model(_model(SUPPORTED["llama-tied"]()))
    assert decoder is not None
    prompts = [[5, 6, 7], [8, 9], [10, 11, 12], [13], [14, 15]]
    kv, _, _, mask = _fast_prefill(decoder, prompts)
    fast = FastStep(decoder, kv, mask, mask.sum(-1) - 1, capacity=3 + 8)
    fast(torch.tensor([1, 2, 3, 4, 5]))
    histories = [[*prompt, token] for prompt, token in zip(prompts, [1, 2, 3, 4, 5], strict=True)]
    storage = fast._state.keys[0].untyped_storage().data_ptr()
    fast.select(torch.tensor([0, 4, 2]))  # rows 1 and 3 leave; the last row takes row 1's place
    joiners = [[20, 21], [22, 23, 24]]
    joining, _, _, joining_mask = _fast_prefill(decoder, joiners)
    assert fast.extend(joining, joining_mask, joining_mask.sum(-1) - 1, 3 + 8) == 0
    assert fast._state.keys[0].untyped_storage().data_ptr() == storage  # moved and joined in the same buffers
    assert fast.width == 4 and fast._state.bias.shape[0] == 5
    histories = [histories[0], histories[4], histories[2], *joiners]
    feed = [6, 7, 8, 9, 10]
    got = fast(torch.tensor(feed))
    want = [_fast_prefill(decoder, [[*history, token]])[1] for history, token in zip(histories, feed, strict=True)]
    torch.testing.assert_close(got, torch.cat(want), atol=LOGIT_TOL[torch.float32], rtol=0)


def _split(layers: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    half = len(layers) // 2
    return layers[:half], layers[half:]


UNSUPPORTED = {
    "gemma": (lambda: GemmaConfig(**_SIZES, head_dim=8), "model type"),
    "sliding window": (lambda: MistralConfig(**_SIZES, sliding_window=8), "sliding window"),
    "gelu MLP": (lambda: LlamaConfig(**_SIZES, hidden_act="gelu"), "activation"),
}


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
def test_other_architectures_decode_through_transformers(case: str, caplog: pytest.LogCaptureFixture) -> None:
    build, reason = UNSUPPORTED[case]
    model = _model(build())
    with caplog.at_level("INFO", logger="rl_engines.rollout._fast_decode"):
        assert FastDecoder.for_model(model) is None
    assert reason in caplog.text
    assert HFEngine(model, HFEngineConfig())._setup.fast_decoder is None


def test_rotary_embeddings_must_cover_whole_heads(caplog: pytest.LogCaptureFixture) -> None:
    model = _model(SUPPORTED["llama-tied"]())
    narrow = LlamaConfig(**{**_SIZES, "num_attention_heads": 8, "num_key_value_heads": 4})  # head_dim 4 of 8
    model.model.rotary_emb = type(model.model.rotary_emb)(narrow)
    with caplog.at_level("INFO", logger="rl_engines.rollout._fast_decode"):
        assert FastDecoder.for_model(model) is None
    assert "rotary embeddings cover 4 of 8" in caplog.text


def test_the_engine_samples_the_same_tokens_with_and_without_the_fast_step() -> None:
    model = _model(SUPPORTED["llama-tied"]())
    fast = HFEngine(model, HFEngineConfig(seed=3))
    plain = HFEngine(model, HFEngineConfig(seed=3, fast_decode=False))
    assert fast._setup.fast_decoder is not None and plain._setup.fast_decoder is None
    prompts = [[5, 6, 7], [8, 9, 10, 11], [5, 6, 7]]
    requests = [Harness.request(f"r{i}", p, 12, temperature=1.0, seed=i) for i, p in enumerate(prompts)]
    # Greedy copies of a prompt keep equal histories: the fast step computes them once (`SharedRows`).
    requests += [Harness.request(f"g{i}", prompts[0], 12) for i in range(4)]
    got, want = fast.generate(requests), plain.generate(requests)
    for a, b in zip(got, want, strict=True):
        assert a.output_ids == b.output_ids
        torch.testing.assert_close(torch.tensor(a.output_logprobs), torch.tensor(b.output_logprobs), atol=1e-5, rtol=0)


@torch.inference_mode()
def test_weights_swapped_under_the_decoder_are_the_ones_it_uses() -> None:
    model, other = _model(SUPPORTED["qwen3"]()), _model(SUPPORTED["qwen3"]())
    with torch.no_grad():
        for parameter in other.parameters():
            parameter.mul_(1.5)
    decoder = FastDecoder.for_model(model)  # built before the swap, as an engine's decoder is
    for mine, theirs in zip(model.parameters(), other.parameters(), strict=True):
        mine.data = theirs.data  # how an update hands the engine tensors it owns
    prompts = [[5, 6, 7], [8, 9]]
    kv, _, tokens, mask = _fast_prefill(decoder, prompts)
    fast = FastStep(decoder, kv, mask, mask.sum(-1) - 1, capacity=3 + STEPS)
    cache, _, mask = _prefill(other, prompts)
    reference = ModelStep(other, cache, mask, mask.sum(-1) - 1, boolean_mask=False)
    for got, want in zip(_decode(fast, tokens), _decode(reference, tokens), strict=True):
        torch.testing.assert_close(got, want, atol=LOGIT_TOL[torch.float32], rtol=0)


@torch.inference_mode()
def test_rows_with_equal_histories_compute_once_with_every_row_s_own_logits(
    monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    decoder = FastDecoder.for_model(_model(SUPPORTED["qwen3"]()))
    assert decoder is not None
    ids, mask, positions = _left_padded([[5, 6, 7], [8, 9]])
    kv, _ = decoder.prefill(ids, mask, positions)
    index = torch.tensor([0, 0, 0, 1, 1, 1, 0])  # 7 rows of 2 prompts, each prompt run once (as `prefill` does)

    def fast_step(share: bool) -> FastStep:
        cache = copy.deepcopy(kv)
        cache.batch_select_indices(index)
        if not share:
            cache.lineage = torch.arange(len(index))
        return FastStep(decoder, cache, mask[index], positions[index, -1], capacity=3 + 6)

    computed: list[int] = []
    step = FastDecoder.step
    monkeypatch.setattr(FastDecoder, "step", lambda self, *a: computed.append(len(a[1])) or step(self, *a))
    shared, alone = fast_step(True), fast_step(False)
    feeds = [[1, 1, 2, 3, 3, 3, 1], [4, 4, 4, 5, 6, 6, 4], [7, 7, 7, 7, 7, 7]]
    for i, tokens in enumerate(feeds):
        if i == 2:  # row 1 leaves
            keep = torch.tensor([0, 2, 3, 4, 5, 6])
            shared.select(keep)
            alone.select(keep)
        assert torch.equal(shared(torch.tensor(tokens)), alone(torch.tensor(tokens)))
    joining, _ = decoder.prefill(ids[:1], mask[:1], positions[:1])
    joining.batch_select_indices(torch.tensor([0, 0]))  # 2 rows of one prompt join, sharing nothing with the rest
    for fast, lineage in ((shared, joining.lineage), (alone, torch.arange(2))):
        rows = copy.deepcopy(joining)
        rows.lineage = lineage
        fast.extend(rows, mask[:1].repeat(2, 1), positions[:2, -1].clone().fill_(2), 3 + 6)
    assert torch.equal(shared(torch.tensor([8, 8, 8, 8, 8, 8, 9, 9])), alone(torch.tensor([8, 8, 8, 8, 8, 8, 9, 9])))
    # Distinct histories per step: 3 (computed as MIN_ROWS), 4, then 4 of the 6 left; with the joiners 4 + 1.
    assert computed[0::2] == [SharedRows.MIN_ROWS, 4, 4, 5]
    assert computed[1::2] == [7, 7, 6, 8]
