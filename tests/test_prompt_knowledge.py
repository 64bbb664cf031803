"""What an operator's prompt shows of the target's knowledge, of the task file and of a long verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel.agent.knowledge import KnowledgeMarkupError, knowledge_for, split
from sagekernel.agent.prompt import Prompts, shown_feedback, shown_reference
from sagekernel.targets import get_target
from sagekernel.targets.base import Knowledge
from sagekernel.tasks.suites import load_suite

DOC = """# Guide
- general advice
<!-- for: reduction, normalization -->
- reduction advice
<!-- end -->
- more general advice
<!-- for: matmul -->
- matmul advice
<!-- end -->
"""


def _k(text: str) -> Knowledge:
    return Knowledge(text, "", "")


def test_a_fenced_passage_moves_to_the_notes_of_the_categories_it_names() -> None:
    shown = knowledge_for(_k(DOC), "normalization")
    assert shown.quick_reference == "# Guide\n- general advice\n- more general advice\n"
    assert shown.notes == ["- reduction advice"]
    assert knowledge_for(_k(DOC), "matmul").notes == ["- matmul advice"]
    assert knowledge_for(_k(DOC), "activation").notes == []
    assert knowledge_for(_k(DOC), "Reduce").notes == ["- reduction advice"]  # MultiKernelBench's spelling


def test_a_category_nobody_classified_gets_every_passage() -> None:
    assert knowledge_for(_k(DOC), "my_custom_thing").notes == ["- reduction advice", "- matmul advice"]
    assert knowledge_for(_k(DOC), "").notes == ["- reduction advice", "- matmul advice"]


@pytest.mark.parametrize("bad", ["<!-- for: a -->\nx\n", "x\n<!-- end -->\n",
                                 "<!-- for: a -->\n<!-- for: b -->\n<!-- end -->\n"])
def test_unbalanced_fences_are_refused(bad: str) -> None:
    with pytest.raises(KnowledgeMarkupError):
        split(bad)


@pytest.mark.parametrize("name", ["cpu", "triton", "cuda", "ascendc"])
def test_every_shipped_knowledge_file_parses_and_shows_no_marker(name: str) -> None:
    k = get_target(name).knowledge()
    for category in ("math", "reduction", "matmul", "unknown"):
        shown = knowledge_for(k, category)
        for text in (shown.quick_reference, shown.debugging_guide, shown.example, *shown.notes):
            assert "<!--" not in text


def test_an_elementwise_prompt_skips_reduction_and_tiling_advice_a_reduction_keeps() -> None:
    tasks = {t.name: t for t in load_suite("demo")}
    cpu, prompts = get_target("cpu"), Prompts()
    abs_system = prompts.system(cpu, tasks["abs"])  # math: elementwise
    norm_system = prompts.system(cpu, tasks["rms_norm"])  # normalization
    assert "reduction(+:acc)" not in abs_system and "tiles of 32-128" not in abs_system
    assert "reduction(+:acc)" in norm_system and "# Notes for normalization operators" in norm_system
    assert "tiles of 32-128" not in norm_system  # matmul advice only
    assert len(abs_system) < len(norm_system)
    # the untrimmed knowledge comes first, so operators of any category share that prefix
    start = abs_system.index("# Example of a complete, correct kernel")
    assert abs_system[:start] == norm_system[:start]


def test_the_task_metadata_block_is_not_shown_but_the_tolerance_is() -> None:
    swish = next(t for t in load_suite("demo") if t.name == "swish")
    shown = shown_reference(swish.source)
    assert "SAGE_TASK" in swish.source and "SAGE_TASK" not in shown
    assert "class Model(nn.Module)" in shown and "def get_inputs" in shown and "BETA = 1.5" in shown
    system = Prompts().system(get_target("cpu"), swish)
    assert "Tolerance: atol 1e-05, rtol 1e-05." in system and '"variants"' not in system


def test_a_metadata_block_the_code_reads_stays(tmp_path: Path) -> None:
    source = 'SAGE_TASK = {"sizes": {"N": 8}}\nN = SAGE_TASK["sizes"]["N"]\n'
    assert shown_reference(source) == source
    assert shown_reference("def broken(:\n") == "def broken(:\n"


def test_a_long_verdict_is_cut_at_a_line_and_says_so() -> None:
    errors = "\n".join(f"kernel.c:{n}:1: error: expected ';' before '}}' token" for n in range(400))
    shown = shown_feedback(errors)
    assert shown is not None and len(shown) < 2700 and shown.startswith("kernel.c:0:1: error")
    assert shown.endswith("more characters of this feedback not shown]")
    assert "\n[..." in shown  # cut at a line end, not mid-line
    assert shown_feedback("short") == "short" and shown_feedback(None) is None
