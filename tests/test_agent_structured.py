"""The gate with structured decisions, over the real protocols: an OpenAI-compatible server
(response_format json_schema, tests/openai_server.py) and the Anthropic Messages API (tool use,
the local server of test_models_anthropic.py), both driven by the real backends and the loop's
own `ask`. Invalid blocks leave their ids unresolved and are re-asked; nothing is guessed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from openai_server import OpenAITestServer
from sagekernel.agent.decisions import SCHEMA_NAME
from sagekernel.agent.gate import complete_reply
from sagekernel.agent.loop import Agent
from sagekernel.agent.prompt import Prompts
from sagekernel.errors import SageError
from sagekernel.models import Message, ModelConfig, make_model
from sagekernel.targets import get_target
from test_models_anthropic import AnthropicTestServer

KERNEL = "#include <stdint.h>\nvoid sage_kernel(const float* x, float* y, int64_t N) { y[0] = x[0]; }\n"
PROSE = f"DIAGNOSIS: copy.\n```c\n{KERNEL}```\n"
FAST = {"retry_base_delay_s": 0.001, "retry_max_delay_s": 0.01}


def gate(model: Any, items: list[int], rules: list[int] = (), max_reasks: int = 2):  # type: ignore[assignment]
    agent = Agent(model, get_target("cpu"), None, None)  # type: ignore[arg-type]
    return complete_reply(agent._ask, [Message("system", "s"), Message("user", "round")], prompts=Prompts(),
                          shown_items=items, shown_rules=list(rules), language="c", max_reasks=max_reasks,
                          structured=agent.structured_output)


def block(*records: tuple[str, str, str]) -> str:
    return json.dumps({"decisions": [{"id": i, "decision": d, "rationale": r} for i, d, r in records]})


# --- OpenAI-compatible: response_format json_schema ---------------------------------------------

def openai(server: OpenAITestServer, **options: Any) -> Any:
    return make_model(f"openai:test-model@{server.base_url}",
                      config=ModelConfig(**FAST, **{"structured_output": "json_schema", **options}))


def test_json_schema_code_first_then_a_validated_block_and_a_reask_for_the_invalid_record() -> None:
    replies = [
        PROSE + "- E5: ADOPTED - prose lines are not the channel here\n",  # ignored: decisions are data
        block(("E5", "ADOPTED", "No, it does not apply"), ("E7", "ADOPTED", "the tail loop"),
              ("R2", "NOT ADOPTED", "no reduction")),
        block(("E5", "NOT ADOPTED", "unrelated to this kernel")),
    ]
    with OpenAITestServer(replies) as server:
        out = gate(openai(server), [5, 7], [2])
    first, decide, reask = server.requests
    assert "response_format" not in first  # the kernel is asked for in prose, in its fenced block
    fmt = decide["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == SCHEMA_NAME
    assert fmt["json_schema"]["strict"] is True
    record = fmt["json_schema"]["schema"]["properties"]["decisions"]["items"]
    assert record["properties"]["id"]["enum"] == ["E5", "E7", "R2"]
    assert decide["messages"][-2] == {"role": "assistant", "content": replies[0]}
    assert "E5, E7, R2" in decide["messages"][-1]["content"]
    # the re-ask names the invalid record and asks the schema for E5 alone
    assert reask["response_format"]["json_schema"]["schema"]["properties"]["decisions"]["items"][
        "properties"]["id"]["enum"] == ["E5"]
    assert "contradicts ADOPTED" in reask["messages"][-1]["content"]
    assert out.parsed.decisions == {5: (False, "unrelated to this kernel"), 7: (True, "the tail loop")}
    assert out.parsed.resident_used == [] and out.reasks == 1 and out.missing == []
    assert out.parsed.code == KERNEL and out.channel == "json_schema" and len(out.replies) == 3


def test_json_schema_a_server_that_ignores_the_schema_leaves_everything_unresolved() -> None:
    """A server that answers prose to response_format: nothing is read from it, nothing guessed."""
    ignored = "- E5: ADOPTED - yes\nAdopted: E5"
    with OpenAITestServer([PROSE, ignored, ignored]) as server:
        out = gate(openai(server), [5])
    assert out.parsed.decisions == {} and out.missing == [5]
    assert out.reasks == 1  # the re-ask's answer brought nothing new: the re-asks end
    assert "not JSON" in server.requests[2]["messages"][-1]["content"]


def test_json_schema_missing_code_is_asked_first_then_the_decisions() -> None:
    replies = ["DIAGNOSIS: thinking", PROSE, block(("E5", "NOT ADOPTED", "unrelated"))]
    with OpenAITestServer(replies) as server:
        out = gate(openai(server), [5])
    _, code, decide = server.requests
    assert "response_format" not in code and "no kernel source" in code["messages"][-1]["content"]
    assert "response_format" in decide
    assert out.parsed.code == KERNEL and out.parsed.decisions == {5: (False, "unrelated")} and out.reasks == 1


def test_structured_output_is_configurable_per_endpoint() -> None:
    reply = f"DIAGNOSIS: d\nADOPTION:\n- E5: NOT ADOPTED - unrelated\n```c\n{KERNEL}```"
    with OpenAITestServer([reply]) as server:
        plain = make_model(f"openai:test-model@{server.base_url}", config=ModelConfig(**FAST))
        assert plain.structured_output is None  # not every server takes response_format: off by default
        out = gate(plain, [5])
    assert "response_format" not in server.requests[0] and out.channel == "prose"
    assert out.parsed.decisions == {5: (False, "unrelated")}
    with OpenAITestServer() as server, pytest.raises(SageError, match="not a mechanism of this backend"):
        openai(server, structured_output="tool")  # Anthropic's mechanism: refused when the model is made


# --- Anthropic: tool use --------------------------------------------------------------------------

@pytest.fixture
def anthropic_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")


def tool(records: list[tuple[str, str, str]] | dict[str, Any]) -> dict[str, Any]:
    data = records if isinstance(records, dict) else json.loads(block(*records))
    return {"type": "tool_use", "name": SCHEMA_NAME, "input": data}


def claude(server: AnthropicTestServer) -> Any:
    return make_model(f"anthropic:claude-test@{server.url}", config=ModelConfig(**FAST))


@pytest.mark.usefixtures("anthropic_key")
def test_tool_use_text_and_call_in_one_reply_and_a_forced_reask_for_the_invalid_record() -> None:
    replies = [
        [{"type": "text", "text": PROSE},
         tool([("E5", "ADOPTED", "false"), ("E7", "NOT ADOPTED", "no reduction here")])],
        [tool([("E5", "NOT ADOPTED", "the kernel has no tail")])],
    ]
    with AnthropicTestServer(replies) as server:
        out = gate(claude(server), [5, 7])
    first, reask = server.requests
    assert first["tool_choice"] == {"type": "auto"}  # text (the fenced kernel) and the call together
    assert first["tools"][0]["name"] == SCHEMA_NAME
    assert first["tools"][0]["input_schema"]["properties"]["decisions"]["items"]["properties"]["id"]["enum"] \
        == ["E5", "E7"]
    assert reask["tool_choice"] == {"type": "tool", "name": SCHEMA_NAME}  # decisions only: the call is forced
    assert reask["tools"][0]["input_schema"]["properties"]["decisions"]["items"]["properties"]["id"]["enum"] \
        == ["E5"]
    assert SCHEMA_NAME in reask["messages"][-2]["content"]  # the model sees what it recorded
    assert out.parsed.decisions == {5: (False, "the kernel has no tail"), 7: (False, "no reduction here")}
    assert out.parsed.code == KERNEL and out.reasks == 1 and out.channel == "tool"
    assert out.parsed.evidence["E7"] == json.dumps({"id": "E7", "decision": "NOT ADOPTED",
                                                    "rationale": "no reduction here"})


@pytest.mark.usefixtures("anthropic_key")
def test_tool_use_no_call_or_two_calls_decide_nothing() -> None:
    """Text that writes the decisions instead of calling the tool, then two calls: both unresolved."""
    replies = [
        PROSE + "- E5: ADOPTED - the tail loop",
        [tool([("E5", "ADOPTED", "fits")]), tool([("E5", "NOT ADOPTED", "unrelated")])],
    ]
    with AnthropicTestServer(replies) as server:
        out = gate(claude(server), [5], max_reasks=3)
    assert [r["tool_choice"]["type"] for r in server.requests] == ["auto", "tool"]
    assert "no structured block" in server.requests[1]["messages"][-1]["content"]
    assert out.parsed.decisions == {} and out.missing == [5] and out.reasks == 1  # no progress: re-asks end


@pytest.mark.usefixtures("anthropic_key")
def test_tool_use_a_call_off_the_schema_is_unresolved_and_the_reask_says_why() -> None:
    replies = [[{"type": "text", "text": PROSE},
                tool({"decisions": [{"id": "E5", "adopted": True, "rationale": "fits"}]})],
               [tool({"decisions": [{"id": "E5", "decision": "Adopted", "rationale": "fits"}]})]]
    with AnthropicTestServer(replies) as server:
        out = gate(claude(server), [5], max_reasks=1)
    note = server.requests[1]["messages"][-1]["content"]
    assert "record 1" in note and "adopted" in note and "decision" in note
    assert out.parsed.decisions == {} and out.missing == [5]


# --- a whole operator through the loop: the trace records the validated records ------------------

def test_the_loop_records_json_schema_decisions_and_never_credits_a_refusal(tmp_path) -> None:
    """One operator of `sage run`'s loop over the OpenAI protocol: the refusal written as
    ADOPTED + "No" stays ⊥ in the trace (no credit), the valid records carry their channel and
    the raw record they came from, and resident rules get records of the same schema."""
    from sagekernel import db
    from sagekernel.agent.loop import AgentConfig
    from sagekernel.harness.verdict import Stage, Verdict
    from sagekernel.memory.io import load_seed
    from sagekernel.memory.policies import make_policy
    from sagekernel.tasks.suites import load_suite
    from test_suspect_verdicts import SEED, TASKS

    seed = tmp_path / "seed.jsonl"
    seed.write_text("\n".join(json.dumps(s) for s in SEED) + "\n")
    conn = db.connect(tmp_path / "ws")
    load_seed(conn, seed)
    policy = make_policy("sage", conn, run_id="r", embedder=None)
    task = next(t for t in load_suite(TASKS) if t.name == "e2e_double")

    def reply(body: dict[str, Any]) -> str:
        if "response_format" not in body:
            return PROSE
        ids = body["response_format"]["json_schema"]["schema"]["properties"]["decisions"]["items"][
            "properties"]["id"]["enum"]
        if len(ids) == 1:  # the re-ask for the refusal: declined again, validly this time
            return block((ids[0], "NOT ADOPTED", "it does not apply to this kernel"))
        first, *rest = ids
        return block((first, "ADOPTED", "No - not used"), *((i, "ADOPTED", "the flat loop") for i in rest))

    verdict = Verdict(stage=Stage.OK, message="", compiled=True, correct=True, candidate_ms=1.0,
                      reference_ms=1.0, speedup=1.0)
    rounds: list[Any] = []

    class Hooks:
        def on_round(self, trace: Any, source: Any) -> None:
            rounds.append(trace)

        def on_episode(self, trace: Any, outcome: Any, last: bool) -> None:
            pass

    with OpenAITestServer(fallback=reply) as server:
        agent = Agent(openai(server), get_target("cpu"), policy, lambda t, c: verdict,
                      AgentConfig(rounds=1, k=3))
        agent.run_operator(task, Hooks())
    [trace] = rounds
    first, *rest = trace.decisions
    assert (first.adopted, first.rationale, first.channel) == (False, "it does not apply to this kernel",
                                                               "json_schema")
    assert all(d.adopted is True and d.channel == "json_schema" for d in rest) and rest
    assert json.loads(rest[0].evidence) == {"id": f"E{rest[0].item_id}", "decision": "ADOPTED",
                                            "rationale": "the flat loop"}
    assert first.item_id not in trace.adopted_ids() and trace.reasks == 1


@pytest.mark.usefixtures("anthropic_key")
def test_the_loop_records_tool_use_decisions_for_items_and_rules(tmp_path) -> None:
    """The same through the Anthropic protocol: one call carries the kernel as text and the
    records as a tool call; the trace keeps both the items' and a resident rule's records."""
    from sagekernel.agent.session import OperatorSession
    from sagekernel.harness.verdict import Stage, Verdict
    from sagekernel.records import ResidentRule, RetrievedItem
    from sagekernel.tasks.suites import load_suite
    from test_suspect_verdicts import TASKS

    class Memory:  # two items and one resident rule, fixed
        def retrieve(self, query: str, **_: Any) -> list[RetrievedItem]:
            return [RetrievedItem(i, f"lesson {i}", "correctness", "elementwise", "", "", "x", 1.0, 0.0, 1.0)
                    for i in (4, 9)]

        def resident_rules(self) -> list[ResidentRule]:
            return [ResidentRule(2, "Loop over every element.", 6)]

    verdict = Verdict(stage=Stage.COMPILE, message="error: x", compiled=False)
    rounds: list[Any] = []

    class Hooks:
        def on_round(self, trace: Any, source: Any) -> None:
            rounds.append(trace)

        def on_episode(self, trace: Any, outcome: Any, last: bool) -> None:
            pass

    replies = [[{"type": "text", "text": PROSE},
                tool([("E4", "ADOPTED", "the flat loop"), ("E9", "NOT ADOPTED", "no reduction"),
                      ("R2", "ADOPTED", "one loop over N")])]]
    task = next(t for t in load_suite(TASKS) if t.name == "e2e_double")
    with AnthropicTestServer(replies) as server:
        agent = Agent(claude(server), get_target("cpu"), Memory(), lambda t, c: verdict)  # type: ignore[arg-type]
        session = OperatorSession(task, agent.target, agent.memory, agent.evaluate, Hooks(), rounds=1, k=2,
                                  history=0)
        agent.round(session)
    [trace] = rounds
    got = [(d.item_id, d.adopted, d.channel) for d in trace.decisions]
    assert got == [(4, True, "tool"), (9, False, "tool")]
    assert [(d.item_id, d.adopted) for d in trace.rule_decisions] == [(2, True)]
    assert trace.resident_used == [2] and trace.reasks == 0 and len(server.requests) == 1
