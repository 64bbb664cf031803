"""The scripted model (turn / regex / sequential / fallback) and model spec parsing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagekernel.errors import BudgetExhausted, ModelError, SageError
from sagekernel.models import Budget, Message, ModelSpecError, make_model, parse_spec
from sagekernel.models.registry import ModelSpec
from sagekernel.models.scripted import ScriptedModel

SCRIPT = {
    "replies": [
        {"turn": 3, "text": "third call"},
        {"match": "(?i)softmax", "text": "softmax kernel"},
        {"match": "RULE-7", "on": "prompt", "text": "saw rule 7", "once": True},
        "first sequential",
        {"text": "second sequential", "finish_reason": "length", "completion_tokens": 99},
        {"match": "overflow", "error": "context length exceeded"},
    ],
    "fallback": "fallback reply",
}


def ask(model: ScriptedModel, user: str, system: str = "sys") -> str:
    return model.complete([Message("system", system), Message("user", user)]).text


def test_resolution_order_turn_regex_sequential_fallback() -> None:
    model = ScriptedModel(SCRIPT)
    assert ask(model, "matmul please") == "first sequential"
    assert ask(model, "Write a SOFTMAX") == "softmax kernel"      # regex on the last user message
    assert ask(model, "softmax again") == "third call"             # turn 3 wins over the regex
    assert ask(model, "x", system="rules: RULE-7") == "saw rule 7"  # regex on the whole prompt
    assert ask(model, "x", system="rules: RULE-7") == "second sequential"  # once: not reused
    assert ask(model, "softmax") == "softmax kernel"               # regex entries are reusable
    assert ask(model, "anything") == "fallback reply"              # sequential ones are used up
    assert model.turn == 7 and len(model.prompts) == 7
    assert model.prompts[1][-1] == Message("user", "Write a SOFTMAX")


def test_reply_fields_and_scripted_errors() -> None:
    model = ScriptedModel(SCRIPT)
    ask(model, "a")
    reply = model.complete([Message("user", "b")])
    assert (reply.finish_reason, reply.completion_tokens, reply.cost_usd) == ("length", 99, 0.0)
    assert ask(model, "integer overflow") == "third call"  # turn 3 first
    with pytest.raises(ModelError, match="context length exceeded"):
        ask(model, "integer overflow")


def test_no_reply_and_no_fallback_is_a_model_error() -> None:
    model = ScriptedModel(["only one"])
    ask(model, "a")
    with pytest.raises(ModelError, match="no scripted reply for call 2"):
        ask(model, "b")


def test_stop_and_max_tokens_behave_like_a_model() -> None:
    model = ScriptedModel([{"text": "code\n```\ntrailing"}, {"text": "x" * 400}])
    assert model.complete([Message("user", "a")], stop=["```"]).text == "code\n"
    reply = model.complete([Message("user", "a")], max_tokens=10)
    assert reply.finish_reason == "length" and reply.completion_tokens == 10 and len(reply.text) == 40


def test_deterministic_across_instances() -> None:
    models = (ScriptedModel(SCRIPT), ScriptedModel(SCRIPT))
    texts = [[ask(m, u) for u in ("softmax", "b", "c", "d")] for m in models]
    assert texts[0] == texts[1]


@pytest.mark.parametrize("suffix", [".json", ".jsonl", ".yaml"])
def test_script_files(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"script{suffix}"
    entries = [{"match": "hello", "text": "hi there"}, {"text": "plain"}]
    if suffix == ".json":
        path.write_text(json.dumps({"replies": entries, "fallback": "fb"}))
    elif suffix == ".jsonl":
        path.write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    else:
        path.write_text("replies:\n  - match: hello\n    text: hi there\n  - text: plain\n")
    model = make_model(f"scripted:{path}")
    assert model.name == f"scripted:{path}"
    assert isinstance(model, ScriptedModel)
    assert [ask(model, "hello"), ask(model, "x")] == ["hi there", "plain"]


@pytest.mark.parametrize(("content", "match"), [
    ("{not json", "not valid JSON"),
    ('{"replies": [{"txt": "typo"}]}', "unknown keys"),
    ('{"replies": [{"match": "(", "text": "x"}]}', "bad regex"),
    ('{"replies": [{"match": "a"}]}', "needs 'text' or 'error'"),
])
def test_bad_scripts_are_clear_errors(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(SageError, match=match):
        make_model(f"scripted:{path}")


def test_missing_script_file(tmp_path: Path) -> None:
    with pytest.raises(SageError, match="cannot read the scripted-model file"):
        make_model(f"scripted:{tmp_path / 'nope.json'}")


def test_budget_applies_to_scripted_models() -> None:
    model = ScriptedModel({"fallback": {"text": "r", "prompt_tokens": 6, "completion_tokens": 4}},
                          budget=Budget(max_tokens=15))
    ask(model, "a")
    ask(model, "b")
    with pytest.raises(BudgetExhausted, match="20 of 15 tokens"):
        ask(model, "c")
    assert model.turn == 2  # the third call never reached the model


@pytest.mark.parametrize(("spec", "expected"), [
    ("openai:qwen2.5-coder@http://localhost:8000/v1",
     ModelSpec("openai", model="qwen2.5-coder", base_url="http://localhost:8000/v1")),
    ("openai:qwen2.5-coder:7b@http://gpu-box:11434/v1/",
     ModelSpec("openai", model="qwen2.5-coder:7b", base_url="http://gpu-box:11434/v1")),
    ("openai:gpt-4o-mini", ModelSpec("openai", model="gpt-4o-mini")),
    ("anthropic:claude-sonnet-4-5", ModelSpec("anthropic", model="claude-sonnet-4-5")),
    ("local", ModelSpec("local")),
    ("local:/models/x.gguf", ModelSpec("local", path=Path("/models/x.gguf"))),
    ("scripted:tests/data/s.json", ModelSpec("scripted", path=Path("tests/data/s.json"))),
])
def test_parse_spec(spec: str, expected: ModelSpec) -> None:
    assert parse_spec(spec) == expected


@pytest.mark.parametrize(("spec", "match"), [
    ("gpt-4o", "unknown model kind 'gpt-4o'"),
    ("openai:", "missing its model"),
    ("scripted:", "missing its file"),
    ("openai:m@localhost:8000", "must start with http:// or https://"),
    ("openai:two words", "malformed model spec"),
    ("vllm:qwen@http://x", "unknown model kind"),
])
def test_malformed_specs_are_clear_errors(spec: str, match: str) -> None:
    with pytest.raises(ModelSpecError, match=match) as err:
        make_model(spec)
    assert "openai:<model>[@<base_url>]" in str(err.value)  # shows the accepted forms
