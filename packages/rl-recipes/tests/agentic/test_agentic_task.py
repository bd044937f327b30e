"""The agentic recipe's pieces without a Trainer: the tool tokenizer, the generated additions and their
demonstrations, the transcript scoring, the loss mask of the warm start, and a greedy held-out evaluation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rl_core.losses import LossNormalizer
from rl_core.schema import ATTENTION_MASK, INPUT_IDS, RESPONSE_MASK
from rl_engines.training import ForwardOutput
from rl_recipes.agentic import (
    FAILURE_KINDS,
    SUCCESS_METRIC,
    TOOL_CALL_METRIC,
    AgenticTask,
    AgenticTaskConfig,
    AgenticWarmStartConfig,
    EpisodeReport,
    Evaluation,
    ProblemSpec,
    demonstration,
    demonstration_examples,
    digit_match,
    evaluate_model,
    failure_kind,
    final_answer,
    generate_problems,
    masked_conversation,
    problem_row,
    score_transcript,
    sft_config,
    shaped_reward,
    tool_call_text,
    warm_start,
)
from rl_recipes.agentic._task import tool_schemas
from rl_recipes.embedded import build_embedded_tokenizer
from rl_recipes.sft import LOG_PROBS_ONLY, SFTData, build_sft_engine, collate, response_nll_loss
from rl_recipes.tools import calculator
from rl_recipes.workflows import encode, parse_tool_calls, render
from rl_runtime.nodes import ResponseSample

SPEC = ProblemSpec(min_digits=4, max_digits=5, train_size=40, heldout_size=8, seed=3)


@pytest.fixture(scope="module")
def task() -> AgenticTask:
    return AgenticTask(AgenticTaskConfig(problems=SPEC))


def test_the_tool_tokenizer_keeps_the_plain_ids_and_renders_tools_and_tool_messages() -> None:
    plain, tools = build_embedded_tokenizer(), build_embedded_tokenizer(tools=True)
    assert plain.chat_template is None and tools.chat_template
    assert {piece: tools.get_vocab()[piece] for piece in plain.get_vocab()} == plain.get_vocab()
    messages = demonstration(problem_row(48213, 93472))
    text = render(tools, messages, tools=tool_schemas(), add_generation_prompt=False)
    assert text.startswith("Tools: calculator\nQuestion: What is 48213 + 93472?\nAnswer:<tool_call>")
    assert "<tool_response>141685</tool_response>\nAnswer:141685" in text
    ids = encode(tools, text)
    assert tools.decode(ids) == text and len(ids) <= 64  # the tool words keep a whole episode short


def test_problems_are_seeded_disjoint_and_the_calculator_answers_them() -> None:
    train, heldout = generate_problems(SPEC)
    assert (train, heldout) == generate_problems(SPEC) and len(train) == 40 and len(heldout) == 8
    assert not {r["question"] for r in train} & {r["question"] for r in heldout}
    for row in train + heldout:
        a, b = (int(x) for x in row["question"].removeprefix("What is ").removesuffix("?").split(" + "))
        assert min(a, b) >= 1000 and max(a, b) <= 99999 and row["answer"] == str(a + b)
    with pytest.raises(ValueError, match=r"only 81 distinct additions of 1\.\.1-digit operands, 90 wanted"):
        generate_problems(ProblemSpec(min_digits=1, max_digits=1, train_size=80, heldout_size=10))
    with pytest.raises(ValueError, match="max_digits=2 is below min_digits=3"):
        ProblemSpec(min_digits=3, max_digits=2)


def test_a_demonstration_calls_the_calculator_and_repeats_its_result() -> None:
    row = problem_row(5063, 36478)
    user, call, tool, answer = demonstration(row)
    (parsed,) = parse_tool_calls(call["content"])
    assert parsed.name == "calculator" and not parsed.error
    assert calculator(**parsed.arguments) == tool["content"] == answer["content"] == row["answer"]
    assert user == row["messages"][0]
    assert demonstration(row, direct=True) == [user, answer]  # an expert adding in its head: no call


def test_the_warm_start_mask_covers_exactly_the_model_s_turns(task: AgenticTask) -> None:
    tokenizer = task.tokenizer
    messages = demonstration(problem_row(78933, 14627))
    ids, mask = masked_conversation(tokenizer, messages)
    full = render(tokenizer, messages, tools=tool_schemas(), add_generation_prompt=False)
    assert ids == encode(tokenizer, full)  # the pieces are the whole rendered conversation
    model_text = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if m], skip_special_tokens=True)
    assert model_text == messages[1]["content"] + messages[3]["content"]
    tool_text = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if not m])
    assert "<tool_response>93560</tool_response>" in tool_text and "What is 78933 + 14627?" in tool_text


def test_the_warm_start_loss_ignores_tool_tokens(task: AgenticTask) -> None:
    # The warm start is `rl-recipes sft`'s path: its rows carry the model-token mask as `response_mask`, the engine
    # computes log-probs there only, and `response_nll_loss` covers nothing else.
    tokenizer, settings = task.tokenizer, AgenticWarmStartConfig(num_demos=2)
    rows = [problem_row(78933, 14627), problem_row(5063, 36478)]
    examples = demonstration_examples(tokenizer, rows, settings)
    batch = collate(examples, tokenizer.pad_token_id)
    ids, mask, valid = batch[INPUT_IDS], batch[RESPONSE_MASK].bool(), batch[ATTENTION_MASK].bool()
    for row, example in enumerate(examples):
        assert ids[row, : example.length].tolist() == masked_conversation(tokenizer, demonstration(rows[row]))[0]
    tool = valid & ~mask
    tool[:, : min(len(e.prompt_ids) for e in examples)] = False  # tool and template tokens after the first turn
    assert tool.sum() > 10 and mask.sum() > 10

    engine = build_sft_engine(sft_config(settings), SFTData(tokenizer, examples, [], []))
    computed = engine.forward(batch, LOG_PROBS_ONLY).log_probs
    assert computed is not None and torch.equal(computed != 0, mask)  # log-probs of the model's tokens only

    torch.manual_seed(0)
    logits = torch.randn(*ids.shape, len(tokenizer), requires_grad=True)

    def loss_of(targets: torch.Tensor) -> torch.Tensor:
        log_probs = torch.log_softmax(logits, -1).gather(-1, targets[..., None])[..., 0]
        normalizer = LossNormalizer.from_mask(batch[RESPONSE_MASK])
        return response_nll_loss(ForwardOutput(log_probs, None, None), batch, normalizer).loss

    loss = loss_of(ids)
    tool_changed, model_changed = ids.clone(), ids.clone()
    tool_changed[tool] = (ids[tool] + 1) % len(tokenizer)
    model_changed[mask] = (ids[mask] + 1) % len(tokenizer)
    assert torch.equal(loss_of(tool_changed), loss)  # a tool token's target changes no loss
    assert not torch.equal(loss_of(model_changed), loss)
    loss.backward()
    assert logits.grad is not None
    assert torch.equal(logits.grad.abs().sum(-1) != 0, mask)  # the gradient reaches the model's tokens only
    expected = -torch.log_softmax(logits, -1).gather(-1, ids[..., None])[..., 0][mask].mean()
    assert torch.allclose(loss, expected)


def test_the_task_scores_the_final_answer_and_counts_tool_calls(task: AgenticTask) -> None:
    right = '<tool_call>{"name": "calculator", "arguments": {"expression": "1 + 2"}}</tool_call>'
    right += "<tool_response>3</tool_response>\nAnswer:3"
    assert final_answer(right) == "3" and score_transcript(right, "3") == (1.0, True, True)
    assert score_transcript(right.replace("Answer:3", "Answer:4"), "3") == (0.0, True, False)
    assert score_transcript("3", "3") == (1.0, False, False)
    item = task.encode(problem_row(1000, 2000), "row 0")
    assert task.decode(item.prompt_ids).endswith("Question: What is 1000 + 2000?\nAnswer:")
    assert item.extras["ground_truth"] == "3000" and item.extras["messages"][0]["role"] == "user"
    samples = [
        ResponseSample(i, item.prompt_ids, tuple(encode(task.tokenizer, text)), "stop", item.extras)
        for i, text in enumerate([right.replace("3", "3000"), "2999", "3000"])
    ]
    result = task.score(samples)
    assert result.scores == (1.0, 0.0, 1.0)
    assert result.metrics[SUCCESS_METRIC] == pytest.approx(2 / 3) and result.metrics[TOOL_CALL_METRIC] == 1 / 3
    with pytest.raises(ValueError, match="row 7: the agentic task needs the fields \\['answer'\\]"):
        task.encode({"question": "What is 1 + 2?"}, "row 7")


def test_partial_credit_rewards_right_digits_and_a_right_call_below_a_right_answer() -> None:
    assert digit_match("93570", "93560") == 0.8 and digit_match("193560", "93560") == pytest.approx(5 / 6)
    assert digit_match("", "93560") == 0.0 and digit_match("9356O", "93560") == 0.0
    shaped = AgenticTask(AgenticTaskConfig(problems=SPEC, digit_credit=0.5, call_credit=0.25))
    call = '<tool_call>{"name": "calculator", "arguments": {"expression": "90000 + 3560"}}</tool_call>'
    texts = [
        f"{call}<tool_response>{result}</tool_response>\nAnswer:{answer}"
        for result, answer in (("93560", "93560"), ("93560", "93570"), ("93561", "93570"), ("93560", "nothing"))
    ]
    item = problem_row(90000, 3560)
    samples = [
        ResponseSample(i, (), tuple(encode(shaped.tokenizer, text)), "stop", {"ground_truth": item["answer"]})
        for i, text in enumerate(texts)
    ]
    result = shaped.score(samples)
    assert result.scores == pytest.approx((1.0, 0.5 * 0.8 + 0.25, 0.5 * 0.8, 0.25))
    assert result.metrics[SUCCESS_METRIC] == 0.25  # success stays the exact answer's share
    assert shaped_reward(texts[1], "93560", 0.0, 0.0) == 0.0  # the default reward is binary
    with pytest.raises(ValueError, match=r"task.digit_credit \+ task.call_credit must be below 1\.0"):
        AgenticTaskConfig(digit_credit=0.5, call_credit=0.5)


def test_held_out_episodes_are_sorted_by_where_they_went_wrong() -> None:
    call = tool_call_text("90000 + 3560")
    question = {"role": "user", "content": "What is 90000 + 3560?"}

    def episode(*turns: tuple[str, str], success: bool = False) -> EpisodeReport:
        messages = (question, *({"role": role, "content": text} for role, text in turns))
        return EpisodeReport(messages, "93560", success, called_tool=True)

    cases = {
        "right": episode(("assistant", call), ("tool", "93560"), ("assistant", "93560"), success=True),
        "no_call": episode(("assistant", "93560")),
        "malformed_call": episode(("assistant", "<tool_call>{calculator</tool_call>"), ("tool", "Error: malformed")),
        "wrong_call": episode(("assistant", tool_call_text("90000 + 3650")), ("tool", "93650"), ("assistant", "93650")),
        "no_answer": episode(("assistant", call), ("tool", "93560")),
        "result_not_stated": episode(("assistant", call), ("tool", "93560"), ("assistant", "93590")),
    }
    assert tuple(cases) == FAILURE_KINDS
    assert {kind: failure_kind(report) for kind, report in cases.items()} == {kind: kind for kind in cases}
    outcomes = Evaluation((*cases.values(), cases["wrong_call"])).outcomes()
    assert outcomes == {**dict.fromkeys(FAILURE_KINDS, 1), "wrong_call": 2}


def test_a_short_warm_start_writes_a_model_the_greedy_evaluation_plays(task: AgenticTask, tmp_path: Path) -> None:
    train, heldout = generate_problems(SPEC)
    settings = AgenticWarmStartConfig(output_dir=str(tmp_path), num_demos=8, steps=3, batch_size=4)
    folder = warm_start(settings, task.tokenizer, train, settings.model_dir)
    assert (folder / "config.json").is_file() and (folder / "tokenizer.json").is_file()
    evaluation = evaluate_model(folder, task, heldout[:2], {"max_turns": 2}, token_budget=48, max_new_tokens=24)
    assert len(evaluation.episodes) == 2 and 0.0 <= evaluation.success_rate <= 1.0
    first = evaluation.episodes[0]
    assert first.messages[0]["content"] == heldout[0]["question"] and first.ground_truth == heldout[0]["answer"]


def test_tool_calling_resolves_in_a_fresh_process_through_the_plugin_entry_point() -> None:
    # As a DAG worker starts: rl_core.load_plugins() first, then the workflow by name, rl_recipes never imported.
    script = (
        "import sys\n"
        "from rl_core import load_plugins\n"
        "from rl_core.workflows import resolve_workflow\n"
        "assert 'rl_recipes.workflows' not in sys.modules\n"
        "load_plugins()\n"
        "print(resolve_workflow('tool_calling').__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ToolCallingWorkflow"
