"""`evaluate_math`: hand-made cases through a fixed-output test double, the real HFEngine path, rejections."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from rl_engines.rollout import GenerateOutput, GenerateRequest, HFEngine, HFEngineConfig
from rl_recipes.embedded import build_embedded_model, build_embedded_tokenizer
from rl_recipes.evaluation import evaluate_math
from rl_recipes.tasks import MathSample, build_prompt, encode_prompt

TOKENIZER = build_embedded_tokenizer()
EOS = TOKENIZER.eos_token_id
SAMPLES = [
    MathSample("What is 2 + 3?", "2 + 3 = 5 #### 5", "5", index=10),
    MathSample("What is 9 - 4?", "9 - 4 = 5 #### 5", "5", index=11),
]


class FixedOutputEngineDouble:
    """Test double for an engine: answers request `rid` with the fixed token ids of `responses[rid]` and
    records the requests it got."""

    def __init__(self, responses: dict[str, str]) -> None:
        self.responses = responses
        self.requests: list[GenerateRequest] = []

    def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateOutput]:
        self.requests += requests
        outputs = []
        for request in requests:
            ids = (*TOKENIZER(self.responses[request.rid], add_special_tokens=False)["input_ids"], EOS)
            outputs.append(GenerateOutput(request.rid, ids, None, "stop", "0", len(request.input_ids)))
        return outputs


def test_scores_hand_made_responses() -> None:
    engine = FixedOutputEngineDouble(
        {
            "eval-0": " 2 + 3 = 5 #### 5",  # right
            "eval-1": " 2 + 3 = 6 #### 6",  # wrong
            "eval-2": " 9 - 4 = 3 #### 3",  # wrong
            "eval-3": " 9 - 4 = 5",  # right: no marker, the last number counts
        }
    )
    result = evaluate_math(engine, SAMPLES, TOKENIZER, max_new_tokens=16, samples_per_prompt=2, k=1)
    assert result.mean_reward == 0.5
    assert result.pass_at_k == 0.5  # pass@1 = 1/2 correct per prompt
    assert (result.k, result.num_prompts, result.samples_per_prompt, result.num_reward_failures) == (1, 2, 2, 0)
    first, second = result.prompts
    assert (first.index, first.question, first.ground_truth) == (10, "What is 2 + 3?", "5")
    assert first.responses == (" 2 + 3 = 5 #### 5", " 2 + 3 = 6 #### 6")  # eos removed
    assert (first.scores, second.scores) == ((1.0, 0.0), (0.0, 1.0))
    assert (first.num_correct, second.num_correct) == (1, 1)
    assert evaluate_math(engine, SAMPLES, TOKENIZER, max_new_tokens=16, samples_per_prompt=2).pass_at_k == 1.0


def test_requests_are_the_encoded_prompts_with_the_sampling_asked_for() -> None:
    engine = FixedOutputEngineDouble({f"eval-{i}": "5" for i in range(4)})
    evaluate_math(engine, SAMPLES, TOKENIZER, max_new_tokens=7)
    assert [r.input_ids for r in engine.requests] == [
        tuple(encode_prompt(build_prompt(s.question), TOKENIZER)) for s in SAMPLES
    ]
    greedy = engine.requests[0].sampling
    assert (greedy.max_new_tokens, greedy.temperature, greedy.seed, greedy.stop_token_ids) == (7, 0.0, None, (EOS,))
    engine.requests.clear()
    evaluate_math(engine, SAMPLES, TOKENIZER, max_new_tokens=7, samples_per_prompt=2, temperature=0.7, seed=100)
    assert [r.sampling.seed for r in engine.requests] == [100, 101, 102, 103]
    assert {r.sampling.temperature for r in engine.requests} == {0.7}


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("embedded_model")
    build_embedded_model(seed=0, tokenizer=TOKENIZER).save_pretrained(str(folder))
    TOKENIZER.save_pretrained(str(folder))
    return folder


def test_real_engine_from_a_folder_and_as_an_engine(model_folder: Path) -> None:
    from_folder = evaluate_math(model_folder, SAMPLES, max_new_tokens=6, samples_per_prompt=2, temperature=1.0)
    assert from_folder.num_prompts == 2 and 0.0 <= from_folder.mean_reward <= 1.0
    assert all(len(p.responses) == 2 and all(isinstance(r, str) for r in p.responses) for p in from_folder.prompts)
    engine = HFEngine.from_config(HFEngineConfig(model_path=str(model_folder), seed=0))
    try:
        greedy = evaluate_math(engine, SAMPLES, TOKENIZER, max_new_tokens=6)
        again = evaluate_math(engine, SAMPLES, TOKENIZER, max_new_tokens=6)
    finally:
        engine.shutdown()
    assert [p.responses for p in greedy.prompts] == [p.responses for p in again.prompts]  # greedy is deterministic
    assert engine.status().state == "stopped"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"samples": []}, "samples is empty"),
        ({"samples_per_prompt": 0}, "samples_per_prompt must be an int >= 1"),
        ({"samples_per_prompt": 2, "k": 3}, r"k must lie in \[1, samples_per_prompt=2\], got k=3"),
        ({"k": 0}, r"k must lie in \[1, samples_per_prompt=1\]"),
        ({"tokenizer": None}, "tokenizer is None; pass the tokenizer that goes with the engine"),
    ],
)
def test_rejections(kwargs: dict[str, object], match: str) -> None:
    arguments: dict[str, object] = {"samples": SAMPLES, "tokenizer": TOKENIZER, "max_new_tokens": 4, **kwargs}
    with pytest.raises(ValueError, match=match):
        evaluate_math(FixedOutputEngineDouble({}), **arguments)  # type: ignore[arg-type]


def test_rejects_a_folder_that_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a Hugging Face model folder"):
        evaluate_math(tmp_path, SAMPLES, TOKENIZER, max_new_tokens=4)


def test_counts_reward_failures_as_zero_scores() -> None:
    def broken(response_text: str, ground_truth: str, **extra: object) -> float:
        raise RuntimeError("no reward today")

    engine = FixedOutputEngineDouble({"eval-0": "5", "eval-1": "5"})
    result = evaluate_math(engine, SAMPLES, TOKENIZER, max_new_tokens=4, reward_fn=broken)
    assert (result.num_reward_failures, result.mean_reward, result.pass_at_k) == (2, 0.0, 0.0)
