"""Issue 21's coverage defences, unit by unit: the size generator, the task declarations, the
special-values / ties / structured inputs, the elementwise slack, the bitwise comparison, and one
build per candidate for a task with input groups."""

from __future__ import annotations

import math
import secrets
from pathlib import Path
from typing import Any

import pytest
import torch

from sagekernel.errors import TaskError
from sagekernel.harness.compare import compare
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.harness.trials import elementwise_slack, plan_trials
from sagekernel.harness.verdict import Stage
from sagekernel.targets import get_target
from sagekernel.tasks.coverage import SizeRule
from sagekernel.tasks.loader import build_inputs, load_task
from sagekernel.tasks.sizegen import LARGE, SMALL, held_out_plan, snap

SUITE = Path(__file__).resolve().parents[1] / "src" / "sagekernel" / "tasks" / "suite"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tasks"


def suite(name: str) -> Any:
    return load_task(SUITE / f"{name}.py")


# ----------------------------------------------------------------------------- comparison

def test_zero_tolerance_compares_bits_keeping_the_sign_of_zero() -> None:
    e = torch.tensor([0.0, -0.0, 1.0, float("nan")])
    assert compare(e.clone(), e, 0.0, 0.0, "float32") is None
    flipped = torch.tensor([-0.0, -0.0, 1.0, float("nan")])
    mism = compare(flipped, e, 0.0, 0.0, "float32")
    assert mism is not None and mism.index == (0,) and "sign of zero" in mism.detail
    # any NaN matches any NaN (canonicalised), a tolerance above zero ignores the sign of zero
    other_nan = torch.tensor([0.0, -0.0, 1.0, 0.0]).view(torch.int32)
    other_nan[3] = 0x7FC00123
    assert compare(other_nan.view(torch.float32), e, 0.0, 0.0, "float32") is None
    assert compare(flipped, e, 1e-6, 0.0, "float32") is None


def test_elementwise_tolerance_tensor() -> None:
    e = torch.tensor([1.0, 1.0])
    got = torch.tensor([1.5, 1.5])
    mism = compare(got, e, torch.tensor([1.0, 0.1]), 0.0, "float32")
    assert mism is not None and mism.count == 1 and mism.index == (1,)


def test_slack_follows_the_output_magnitude_not_the_worst_error_anywhere() -> None:
    """exp on large inputs: PyTorch's float32 error near 1e30 must not become slack near 1."""
    x = torch.tensor([0.5, -3.0, 69.0, 70.0], dtype=torch.float64)
    expected = x.exp().float()
    declared = x.float().exp()
    declared[2:] = torch.nextafter(declared[2:], torch.tensor(float("inf")))  # one ulp off up there
    slack = elementwise_slack(declared, expected)
    assert slack is not None
    assert float(slack[2]) > 1e22 and float(slack[0]) < 1e-5 and float(slack[1]) < 1e-5


# ----------------------------------------------------------------------------- size generator

@pytest.mark.parametrize("name", ["level1/abs", "level2/softmax", "level3/rotary_embedding",
                                  "level3/rms_norm_rope", "level3/attention"])
def test_held_out_shapes_go_below_and_above_the_published_ones(name: str) -> None:
    task = suite(name)
    published = task.all_shapes()
    free = [s for s, v in task.sizes.items() if v > 2]
    inner = free[-1]
    for _ in range(30):
        plan = held_out_plan(task, secrets.SystemRandom())
        shapes = {s.label: s.sizes for s in plan.shapes}
        small, large = shapes[SMALL], shapes[LARGE]
        for s in free:
            assert small[s] < min(p[s] for p in published) or small[s] == 1
            for sizes in (small, large):
                assert task.coverage.size_rules.get(s, SizeRule()).allows(sizes[s]), (s, sizes)
        assert large[inner] >= 1.5 * max(p[inner] for p in published)
        assert (large[inner] % 8 != 0) or bool(task.coverage.size_rules)  # a tail past whole vectors
        if not task.coverage.size_rules:
            assert (small[inner] + 1) % 8 == 0  # every tail branch taken
            assert (math.prod(small[s] for s in free) + 1) % 8 == 0
        # within ELEMENT_GROWTH x the default's, unless the stretched innermost size alone exceeds it
        others = math.prod(large[s] for s in free[:-1])
        assert math.prod(large[s] for s in free) <= 2 * math.prod(task.sizes[s] for s in free) or others == 1


def test_a_rule_that_allows_no_value_is_an_explicit_error() -> None:
    assert snap(7, SizeRule(multiple_of=4, min=9, max=11), 1, 100) is None
    assert snap(7, SizeRule(multiple_of=2), 1, 100) in (6, 8)
    task = suite("level2/softmax")
    task.coverage.size_rules["D"] = SizeRule(multiple_of=4, min=9, max=11)  # no value at all
    with pytest.raises(TaskError, match="size rules"):
        held_out_plan(task)


def test_an_inferred_task_states_why_it_has_no_held_out_shape() -> None:
    plan = held_out_plan(load_task(FIXTURES / "scale_groups.py").group_task(0))
    assert not plan.shapes and "synthetic" in plan.unavailable


# ----------------------------------------------------------------------------- declarations

def _task_file(tmp_path: Path, extra: str, body: str = "") -> Path:
    path = tmp_path / "t.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\nB = 8\nD = 16\nLO = -0.5\n"
        "SAGE_TASK = {'name': 't', 'level': 1, 'category': 'math', 'inputs': {'x': ['B', 'D']},\n"
        "    'outputs': {'out': ['B', 'D']}, 'sizes': {'B': 8, 'D': 16}, 'attrs': {'lo': -0.5}, "
        + extra + "}\n"
        "class Model(nn.Module):\n    def __init__(self, lo):\n        super().__init__()\n"
        "        self.lo = lo\n    def forward(self, x):\n        return torch.clamp(x, min=self.lo)\n"
        "def get_inputs():\n    return [torch.randn(B, D)]\ndef get_init_inputs():\n    return [LO]\n" + body
    )
    return path


@pytest.mark.parametrize("extra, words", [
    ("'special_values': ['nan', 'denormal']", "special_values"),
    ("'ties': ['y']", "ties"),
    ("'attr_domains': {'lo': {'range': [0.0, 1.0]}}", "outside its domain"),
    ("'attr_domains': {'lo': {'range': [-1.0, 0.0], 'bind': 'HI'}}", "module variable"),
    ("'size_rules': {'D': {'multiple_of': 3}}", "breaks its own size_rules"),
    ("'edge_cases': ['empty']", "make_inputs"),
    ("'structured_domains': {'x': 'real'}", "structured_domains"),
])
def test_bad_declarations_are_task_errors(tmp_path: Path, extra: str, words: str) -> None:
    with pytest.raises(TaskError, match=words):
        load_task(_task_file(tmp_path, extra))


def test_attribute_domains_rebind_the_reference(tmp_path: Path) -> None:
    task = load_task(_task_file(tmp_path, "'attr_domains': {'lo': {'range': [-2.0, 0.0]}}"))
    plan = plan_trials(task, HarnessConfig(held_out_shape=False))
    drawn = [t for t in plan.trials if t.attrs]
    assert drawn and all(t.attrs["lo"] != -0.5 and -2.0 <= t.attrs["lo"] <= 0.0 for t in drawn)
    for t in drawn:
        assert float(t.expected[0].min()) == pytest.approx(max(t.attrs["lo"], float(t.inputs[0].min())))
    # with held-out shapes, the drawn values ride on the large one (no extra process)
    carried = [t for t in plan_trials(task, HarnessConfig()).trials if t.attrs]
    assert [t.shape_label for t in carried] == [LARGE]


# ----------------------------------------------------------------------------- inputs

def test_special_values_leave_clean_rows_and_hit_the_tail() -> None:
    task = suite("level2/reduce_max")
    x = build_inputs(task, seed=3, distribution="special_values")[0]
    flat = x.reshape(-1)
    special = ~torch.isfinite(x) | (x == 0) | ((x.abs() < torch.finfo(x.dtype).tiny) & (x != 0))
    assert bool(torch.isnan(x).any()) and bool(torch.isinf(x).any())
    assert not bool(torch.isfinite(flat[-1])) or float(flat[-1]) == 0 or abs(float(flat[-1])) < 1e-37
    rows_hit = special.any(dim=1)
    assert 0 < int(rows_hit.sum()) < x.shape[0]


def test_ties_repeat_a_few_of_the_inputs_own_values() -> None:
    task = suite("level2/argmax")
    base = build_inputs(task, seed=5, distribution="normal")[0]
    x = build_inputs(task, seed=5, distribution="ties")[0]
    assert torch.unique(x).numel() <= 6 and set(torch.unique(x).tolist()) <= set(base.reshape(-1).tolist())


def test_structured_inputs_are_redrawn_within_their_domain() -> None:
    task = suite("level3/rms_norm_rope")
    _, _, cos, _ = build_inputs(task, seed=1, distribution="uniform")
    half = cos.shape[-1] // 2
    assert not torch.equal(cos[:, :half], cos[:, half:])  # the published tables have equal halves
    _, _, cos0, _ = build_inputs(task, seed=1, distribution="default")
    assert torch.equal(cos0[:, :half], cos0[:, half:])
    scale = build_inputs(suite("level2/dequantize_per_channel"), seed=2, distribution="heavy_tailed")[1]
    assert bool((scale > 0).all())


def test_a_structured_input_without_a_domain_is_kept(tmp_path: Path) -> None:
    path = _task_file(tmp_path, "'structured_inputs': ['x']")
    task = load_task(path)
    kept = build_inputs(task, seed=4, distribution="heavy_tailed")[0]
    assert torch.equal(kept, build_inputs(task, seed=4)[0])


def test_every_named_edge_case_gets_a_trial() -> None:
    task = suite("level3/grouped_matmul")
    plan = plan_trials(task, HarnessConfig(held_out_shape=False))
    kinds = {t.distribution: t for t in plan.trials}
    for edge in ("empty_last_group", "empty_first_group", "single_group"):
        assert edge in kinds
    assert int(kinds["empty_last_group"].inputs[2][-1]) == 0
    assert int(kinds["empty_first_group"].inputs[2][0]) == 0


# ----------------------------------------------------------------------------- input groups

class CountingTarget:
    """The real CPU target, counting its lint and build calls."""

    def __init__(self) -> None:
        self.inner = get_target("cpu")
        self.calls = {"lint": 0, "build": 0}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def lint(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["lint"] += 1
        return self.inner.lint(*args, **kwargs)

    def build(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["build"] += 1
        return self.inner.build(*args, **kwargs)


def test_a_task_with_input_groups_is_linted_and_built_once() -> None:
    task = load_task(FIXTURES / "scale_groups.py")
    assert len(task.groups) == 2
    target = CountingTarget()
    v = evaluate(task, (FIXTURES / "scale_groups.cpu.c").read_text(), target,  # type: ignore[arg-type]
                 HarnessConfig(skip_timing=True))
    assert v.stage is Stage.OK, v.message
    assert target.calls == {"lint": 1, "build": 1} and v.build["builds"] == 1
    assert all("synthetic" in " ".join(g["not_covered"]) for g in v.checks["groups"])


def test_shrinking_a_stretched_size_keeps_its_tail_past_whole_vectors() -> None:
    """_fit halves a drawn size when the shape grows too large; a half can land on whole 8-vectors
    (144 -> 72) and lose the tail the draw put there. Seeded draws that did so before the fix."""
    import random

    from sagekernel.tasks.sizegen import _off_vector_width

    assert _off_vector_width(72, SizeRule(), 1, 100) == 71
    assert _off_vector_width(72, SizeRule(), 72, 100) == 73
    assert _off_vector_width(72, SizeRule(multiple_of=8), 1, 100) == 72  # the rule wins
    assert _off_vector_width(73, SizeRule(), 1, 100) == 73
    task = suite("level3/attention")
    inner = [s for s, v in task.sizes.items() if v > 2][-1]
    for seed in range(600):
        plan = held_out_plan(task, random.Random(seed))  # type: ignore[arg-type]  # the same draws, seeded
        large = {s.label: s.sizes for s in plan.shapes}[LARGE]
        assert large[inner] % 8, (seed, large)
