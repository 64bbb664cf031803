"""Multi-file replies (agent/files.py, docs/target_seam.md): one fenced block per file, headed by its path."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from sagekernel.agent.files import (
    fenced_blocks,
    file_paths,
    pick_files,
    read_candidate,
    render_candidate,
    single_path,
)
from sagekernel.agent.gate import IncompleteReply, complete_reply
from sagekernel.agent.prompt import Prompts
from sagekernel.agent.protocol import parse_reply
from sagekernel.candidate import Candidate
from sagekernel.models.base import Message, Reply

PATHS = ["op_kernel/add_custom.cpp", "op_host/add_custom_tiling.h", "op_host/add_custom.cpp"]
KERNEL = "extern \"C\" __global__ void add_custom(GM_ADDR x) {\n  Run(x);\n}"
TILING = "struct TilingData { uint32_t total; };"
HOST = "int main() { return 0; }"


def parse(text: str, paths=PATHS):
    return parse_reply(text, shown_items=[4], shown_rules=[], language="ascendc", paths=paths)


@pytest.mark.parametrize("style", ["label", "info", "heading", "comment", "basename"])
def test_each_file_is_read_by_its_path(style: str):
    def block(path: str, body: str) -> str:
        if style == "label":
            return f"FILE: {path}\n```cpp\n{body}\n```"
        if style == "info":
            return f"```cpp {path}\n{body}\n```"
        if style == "heading":
            return f"### `{path}`\n\n```cpp\n{body}\n```"
        if style == "comment":
            return f"```cpp\n// FILE: {path}\n{body}\n```"
        return f"**{path.rsplit('/', 1)[-1] if 'tiling' in path else path}**\n```cpp\n{body}\n```"

    text = "- E4: ADOPTED - tiling\n" + "\n".join(
        block(p, b) for p, b in zip(PATHS, (KERNEL, TILING, HOST), strict=True))
    r = parse(text)
    assert r.files == {PATHS[0]: KERNEL + "\n", PATHS[1]: TILING + "\n", PATHS[2]: HOST + "\n"}
    assert r.missing_files(PATHS) == []
    cand = r.candidate(PATHS, PATHS[0])
    assert isinstance(cand, Candidate) and list(cand.files) == PATHS
    assert r.decisions == {4: (True, "tiling")}


def test_missing_and_unknown_files_are_reported():
    r = parse(f"FILE: {PATHS[0]}\n```cpp\n{KERNEL}\n```\nFILE: op_host/other.cpp\n```cpp\nint x;\n```")
    assert r.missing_files(PATHS) == PATHS[1:]
    assert r.unknown_files == ["op_host/other.cpp"]
    assert r.candidate(PATHS, PATHS[0]) is None


def test_missing_files_are_reasked_without_evaluation():
    first = f"- E4: NOT ADOPTED - no\nFILE: {PATHS[0]}\n```cpp\n{KERNEL}\n```"
    second = "\n".join(f"FILE: {p}\n```cpp\n{b}\n```" for p, b in zip(PATHS[1:], (TILING, HOST), strict=True))
    replies = iter([first, second])
    asked: list[str] = []

    def ask(messages: list[Message], reask: int = 0, grammar: str | None = None) -> Reply:
        asked.append(messages[-1].content)
        return Reply(text=next(replies), model="scripted")

    out = complete_reply(ask, [Message("user", "go")], prompts=Prompts(), shown_items=[4], shown_rules=[],
                         language="ascendc", max_reasks=2, files=[(p, "cpp") for p in PATHS])
    assert out.reasks == 1
    assert all(f"FILE: {p}" in asked[1] for p in PATHS[1:]) and f"FILE: {PATHS[0]}" not in asked[1]
    cand = out.parsed.candidate(PATHS, PATHS[0])
    assert cand is not None and cand.files[PATHS[2]] == HOST + "\n"


def test_still_missing_files_fail_the_round_at_parse():
    def ask(messages: list[Message], reask: int = 0, grammar: str | None = None) -> Reply:
        return Reply(text=f"FILE: {PATHS[0]}\n```cpp\n{KERNEL}\n```", model="scripted")

    with pytest.raises(IncompleteReply, match=r"op_host/add_custom_tiling\.h"):
        complete_reply(ask, [Message("user", "go")], prompts=Prompts(), shown_items=[], shown_rules=[],
                       language="ascendc", max_reasks=1, files=[(p, "cpp") for p in PATHS])


def test_single_file_target_keeps_the_single_block():
    r = parse_reply("- E4: ADOPTED - x\n```c\nvoid sage_kernel(void) {}\n```", shown_items=[4],
                    shown_rules=[], language="c", paths=["kernel.c"])
    cand = r.candidate(["kernel.c"], "kernel.c")
    assert cand == Candidate.single("kernel.c", "void sage_kernel(void) {}\n")
    assert render_candidate(cand) == "void sage_kernel(void) {}\n"  # stored as before the seam


@dataclass
class _Spec:
    path: str
    language: str = "cpp"
    description: str = ""


class _MultiTarget:
    name, language = "fake", "ascendc"

    def files(self, task: object) -> list[_Spec]:
        return [_Spec(p) for p in PATHS]


class _OldTarget:
    name, language = "old", "c"


def test_paths_of_targets_with_and_without_files():
    assert file_paths(_MultiTarget(), None) == PATHS and single_path(_MultiTarget(), None) == PATHS[0]
    assert file_paths(_OldTarget(), None) == [] and single_path(_OldTarget(), None) == "kernel.c"


def test_render_and_read_back_a_multi_file_candidate():
    cand = Candidate(dict(zip(PATHS, (KERNEL + "\n", TILING + "\n", HOST + "\n"), strict=True)))
    text = render_candidate(cand, {p: "cpp" for p in PATHS})
    assert read_candidate(text, PATHS) == cand
    blocks, _ = fenced_blocks(text)
    assert [b.heading for b in blocks] == [f"FILE: {p}" for p in PATHS]
    assert pick_files(blocks, PATHS)[0] == cand.files


class _TwoFileCpu:
    """The CPU target with a second file, to drive the loop through a multi-file reply."""

    def __init__(self) -> None:
        from sagekernel.targets import get_target

        self.inner = get_target("cpu")
        self.name, self.language = "two-file", "c"

    def files(self, task: object) -> list[_Spec]:
        return [_Spec("kernel.c", "c", "the kernel"), _Spec("helpers.h", "c", "inline helpers")]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_the_loop_evaluates_a_candidate_with_every_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    from sagekernel.agent.loop import Agent, AgentConfig
    from sagekernel.harness.verdict import Stage, Verdict
    from sagekernel.memory.policies import NoMemory
    from sagekernel.tasks.suites import load_suite

    kernel = ('#include "helpers.h"\n'
              "void sage_kernel(const float* x, float* out, long N) { twice(x, out, N); }")
    helpers = "static inline void twice(const float* x, float* out, long N) { }"
    replies = iter([f"DIAGNOSIS: d\nFILE: kernel.c\n```c\n{kernel}\n```",
                    f"FILE: helpers.h\n```c\n{helpers}\n```"])
    prompts: list[str] = []

    class Model:
        name = "scripted"

        def complete(self, messages: list[Message], **_: object) -> Reply:
            prompts.append(messages[-1].content)
            return Reply(text=next(replies), model="scripted")

    judged: list[Candidate] = []

    def evaluate(task: object, candidate: Candidate) -> Verdict:
        judged.append(candidate)
        return Verdict(stage=Stage.OK, message="", compiled=True, correct=True)

    class Hooks:
        def __init__(self) -> None:
            self.sources: list[str | None] = []

        def on_round(self, trace: object, source: str | None) -> None:
            self.sources.append(source)

        def on_episode(self, trace: object, outcome: object, last: bool) -> None:
            pass

    task = next(t for t in load_suite(Path(__file__).parent / "e2e_tasks") if t.name == "e2e_double")
    agent = Agent(Model(), _TwoFileCpu(), NoMemory(), evaluate, AgentConfig(rounds=1))  # type: ignore[arg-type]
    hooks = Hooks()
    outcome = agent.run_operator(task, hooks)  # type: ignore[arg-type]
    assert "FILE: kernel.c" in prompts[0] and "FILE: helpers.h" in prompts[0]
    assert "It has no block for: helpers.h" in prompts[1]  # re-asked; nothing was evaluated in between
    assert judged == [Candidate({"kernel.c": kernel + "\n", "helpers.h": helpers + "\n"})]
    assert outcome.correct and outcome.rounds[0].reasks == 1
    stored = hooks.sources[0]
    assert stored is not None and read_candidate(stored, ["kernel.c", "helpers.h"]) == judged[0]
