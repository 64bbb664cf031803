"""Held-out shapes: sizes the task never published, drawn fresh per evaluation (issue 21, item 6).

For every evaluation the generator draws two shapes from a trusted-side random source:

- ``held-out small``: every free size below the smallest value the task publishes for it (the
  default and the variants), so loops that assume at least one full vector or tile are exercised;
- ``held-out large``: the innermost free size (the last in ``sizes`` order) and a random half of
  the others well above the largest published value (`STRETCH` times it), the rest below it, so
  the element count stays within `ELEMENT_GROWTH` times the default's (the CPU budget of
  tasks/sizepolicy.py still holds).

Every drawn size is placed at a residue modulo the vector widths (`VECTOR_WIDTHS`) that published
shapes rarely have: in the small shape the innermost size is -1 modulo the widest width that fits
(every bit of a tail set: a tail handled by 4 + 2 + 1 pieces takes every branch) and the others
+1, so the element count is -1 too; in the large shape a tail past whole 8-vectors but short of
64 (9..63 mod 64, not a multiple of 8); unless the task's
``size_rules`` (tasks/coverage.py: ``multiple_of``, ``min``, ``max``, ``fixed``) forbid it; the
rules always win, and a symbol whose rules leave no value is an explicit `TaskError`.

Free sizes: a symbol is free unless its rule says ``fixed`` or its published value is at most 2
(structural: a pair, a flag). For a task inferred from a plain file (no ``SAGE_TASK``), only the
module-level ints of at least `MIN_SCALABLE` are free (smaller ints are kernel sizes, dims,
strides, as in the size policy) and equal published values move together (``batch_size`` and
``input_shape[0]`` of one file agree); synthetic symbols (``IN0_D1``, ``C64``) cannot be rebound, so
such a task gets no held-out shape and `HeldOutPlan.unavailable` says why; the verdict states it.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field

from sagekernel.errors import TaskError
from sagekernel.tasks.coverage import SizeRule
from sagekernel.tasks.sizepolicy import MIN_SCALABLE
from sagekernel.tasks.task import Task

#: SIMD / tile widths whose tails a held-out size must not line up with.
VECTOR_WIDTHS = (8, 16, 64)
#: The large shape's stretched sizes: this many times the largest published value.
STRETCH = (1.5, 3.0)
#: The large shape's product of free sizes stays within this many times the default's.
ELEMENT_GROWTH = 2.0
#: Labels of the held-out shapes, in the order they are planned.
SMALL, LARGE = "held-out small", "held-out large"


@dataclass(frozen=True)
class HeldOutShape:
    label: str
    sizes: dict[str, int]


@dataclass
class HeldOutPlan:
    shapes: list[HeldOutShape] = field(default_factory=list)
    #: Why the task has no held-out shape (recorded in the verdict), or "".
    unavailable: str = ""


def _rule(task: Task, sym: str) -> SizeRule:
    return task.coverage.size_rules.get(sym, SizeRule())


def _declared(task: Task) -> bool:
    return task.layout_note.startswith("level and category from SAGE_TASK")


def free_groups(task: Task) -> tuple[list[list[str]], list[str]]:
    """(groups of free symbols that move together, synthetic symbols a plain file cannot rebind)."""
    if _declared(task):
        free = [s for s, v in task.sizes.items() if not _rule(task, s).fixed and v > 2]
        return [[s] for s in free], []
    from sagekernel.tasks import confine
    from sagekernel.tasks.modules import module_ints, task_module

    child = confine.child_for(task)  # the harness judging: read in the task sandbox
    ints = confine.module_ints(child, task) if child is not None else module_ints(task_module(task))
    synthetic = [s for s in task.sizes if s not in ints]
    by_value: dict[int, list[str]] = {}
    for s, v in task.sizes.items():
        if s in ints and v >= MIN_SCALABLE:
            by_value.setdefault(v, []).append(s)
    return list(by_value.values()), synthetic


def snap(value: int, rule: SizeRule, lo: int, hi: int) -> int | None:
    """The value allowed by `rule` within [lo, hi] nearest to `value` (ties: the smaller), or None."""
    lo, hi = max(lo, rule.min), min(hi, rule.max) if rule.max is not None else hi
    if lo > hi:
        return None
    m = rule.multiple_of
    first, last = -(-lo // m) * m, hi // m * m
    if first > last:
        return None
    down = min(max(value // m * m, first), last)
    up = min(max(down + m, first), last)
    return down if abs(value - down) <= abs(up - value) else up


def _with_residue(base: int, width: int, residues: range, rng: secrets.SystemRandom) -> int:
    """`base` moved to the nearest value at a residue drawn from `residues` modulo `width`."""
    r = rng.choice([x for x in residues if x % 8]) if width > 8 else rng.choice(list(residues))
    value = base // width * width + r
    return value if value >= base else value + width


def _at_residue(residue: int, top: int, rng: secrets.SystemRandom) -> int:
    """A value in [1, top] congruent to `residue` modulo the widest vector width that has one
    (residue -1: every bit below the width set, so every branch of a tail is taken), else any."""
    for width in sorted(VECTOR_WIDTHS, reverse=True):
        first = residue % width or width
        if first <= top:
            return first + width * rng.randint(0, (top - first) // width)
    return rng.randint(1, max(1, top))


def _merged_rule(task: Task, syms: list[str]) -> SizeRule:
    rules = [_rule(task, s) for s in syms]
    return SizeRule(math.lcm(*(r.multiple_of for r in rules)), max(r.min for r in rules),
                    min((r.max for r in rules if r.max is not None), default=None))


def _draw(task: Task, syms: list[str], kind: str, rng: secrets.SystemRandom, inner: bool = False) -> int:
    """One value for a group of symbols (they share their published values' range); `inner`: the
    group is the innermost free size (the small shape puts it at residue -1, the others at +1, so
    the element count has every low bit set too)."""
    published = [shape[s] for shape in task.all_shapes() for s in syms]
    lo_pub, hi_pub = min(published), max(published)
    rule = _merged_rule(task, syms)
    if kind == SMALL:
        top = max(rule.min, lo_pub - 1)
        raw = _at_residue(-1 if inner else 1, top, rng)
        got = snap(raw, rule, 1, top) or snap(raw, rule, 1, hi_pub)
    elif kind == LARGE:
        target = round(hi_pub * rng.uniform(*STRETCH))
        raw = _with_residue(max(target, hi_pub + 9), 64, range(9, 64), rng)
        got = snap(raw, rule, hi_pub + 1, 1 << 40) or snap(raw, rule, 1, 1 << 40)
    else:  # a size below the largest published one, at a tail residue (the large shape's others)
        raw = _with_residue(rng.randint(max(1, lo_pub // 2), hi_pub), 16, range(1, 16), rng)
        got = snap(raw, rule, 1, hi_pub)
    if got is None:
        raise TaskError(f"{task.source_path}: the size rules of {', '.join(syms)} ({rule}) allow no "
                        f"value for the {kind} shape; fix SAGE_TASK['size_rules']")
    return got


def _fit(task: Task, sizes: dict[str, int], groups: list[list[str]], stretched: set[int]) -> None:
    """Halve the unstretched groups (then the stretched, never below STRETCH[0] times their
    published maximum) until the product of free sizes is within ELEMENT_GROWTH times the
    default's (or nothing can shrink further)."""
    def product(s: dict[str, int]) -> int:
        return math.prod(s[g[0]] for g in groups)

    budget = ELEMENT_GROWTH * product(dict(task.sizes))
    order = [i for i in range(len(groups)) if i not in stretched] + sorted(stretched)
    for i in order:
        syms = groups[i]
        top = max(shape[s] for shape in task.all_shapes() for s in syms)
        floor = math.ceil(STRETCH[0] * top) if i in stretched else 1
        rule = _rule(task, syms[0])
        while product(sizes) > budget:
            smaller = snap(sizes[syms[0]] // 2, rule, floor, sizes[syms[0]] - 1)
            if smaller is None:
                break
            smaller = _off_vector_width(smaller, rule, floor, sizes[syms[0]] - 1)
            for s in syms:
                sizes[s] = smaller


def _off_vector_width(value: int, rule: SizeRule, lo: int, hi: int) -> int:
    """`value`, or a neighbour in [lo, hi] the rule allows, that is not a multiple of 8: halving a
    drawn size can land on whole vectors and lose the tail the draw put there."""
    if value % 8:
        return value
    return next((v for v in (value - 1, value + 1) if lo <= v <= hi and v % 8 and rule.allows(v)), value)


def held_out_plan(task: Task, rng: secrets.SystemRandom | None = None) -> HeldOutPlan:
    """The held-out shapes of one evaluation (module docstring)."""
    rng = rng or secrets.SystemRandom()
    groups, synthetic = free_groups(task)
    if not groups:
        why = ("its sizes are synthetic symbols of a file without SAGE_TASK, which cannot be rebound "
               f"({', '.join(synthetic[:6])})" if synthetic
               else "no size is free to vary (all fixed or <= 2)")
        return HeldOutPlan([], f"no held-out shape: {why}")
    small = dict(task.sizes)
    for i, syms in enumerate(groups):
        v = _draw(task, syms, SMALL, rng, inner=i == len(groups) - 1)
        small.update({s: v for s in syms})
    large = dict(task.sizes)
    # the innermost free size always grows (rows, buffers, tails live there), a random half of the others too
    others = rng.sample(range(len(groups) - 1), (len(groups) - 1) // 2)
    stretched = {len(groups) - 1, *others}
    for i, syms in enumerate(groups):
        v = _draw(task, syms, LARGE if i in stretched else "mid", rng)
        large.update({s: v for s in syms})
    _fit(task, large, groups, stretched)
    published = task.all_shapes()
    shapes = [HeldOutShape(label, sizes) for label, sizes in ((SMALL, small), (LARGE, large))
              if sizes not in published]
    return HeldOutPlan(shapes, "")


__all__ = ["ELEMENT_GROWTH", "LARGE", "SMALL", "STRETCH", "VECTOR_WIDTHS", "HeldOutPlan", "HeldOutShape",
           "free_groups", "held_out_plan", "snap"]
