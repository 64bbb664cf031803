"""The SAGE paper's NPUKernelBench evaluation subset (Table 3: 88 operators, 20 L1 + 50 L2 + 18 L3).

- Level 1: the 20 operators the paper lists (`PAPER_LEVEL1`).
- Level 3: every Level-3 operator (18 in V2.0).
- Level 2: 50 operators covering every Level-2 category, chosen by this rule (`level2_selection`),
  which depends only on the benchmark's operator names and categories:

  1. each category c of n_c operators (N in all) gets the quota q_c = 50 * n_c / N;
  2. its allotment starts at max(1, the paper's named operators in c, floor(q_c));
  3. while the allotments sum to less than 50, the category with the largest q_c - allotment (ties:
     the alphabetically first category) gets one more, never beyond n_c; while they sum to more,
     the category with the smallest q_c - allotment that is above its minimum gives one back;
  4. within a category the paper's named operators come first (`PAPER_LEVEL2_NAMED`), then the
     others in the order of the SHA-256 of their names (a fixed order no one chose).

  On V2.0 (102 Level-2 operators in 9 categories) this gives Activation 9 (the nine named),
  Foreach 26, Norm 7, Loss 2, TensorMove 2, Linalg 1, Mask 1, Optim 1, Reduce 1;
  `sage tasks subset ROOT` prints the list.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

PAPER_LEVEL1 = ("Equal", "Less", "LessEqual", "IsFinite", "IsInf", "NonFiniteCheckOp", "GatherV3",
                "ScatterList", "Sqrt", "SinMath", "CastMath", "AbsMath", "Addcdiv", "ClipByValue",
                "CosMath", "Lerp", "StridesliceNegConcatV2", "Arange", "Eye", "Fill")
PAPER_LEVEL2_NAMED = ("DequantSwigluQuant", "FastGelu", "Gelu", "InplaceAttnSoftmax", "SwiGlu", "Swish",
                      "GeGluV2", "GeluGrad", "MulSigmoid")
LEVEL2_COUNT = 50
SUBSET_NAME = "paper_eval"


@dataclass(frozen=True)
class Operator:
    """An operator of the benchmark: name, level and category (the folder names)."""

    name: str
    level: int
    category: str


@dataclass(frozen=True)
class Subset:
    """The selected operator names per level, and the paper's operators the benchmark lacks."""

    level1: tuple[str, ...]
    level2: tuple[str, ...]
    level3: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return self.level1 + self.level2 + self.level3


def _hash_order(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8")).hexdigest()


def allotments(sizes: dict[str, int], named: dict[str, int], total: int = LEVEL2_COUNT) -> dict[str, int]:
    """How many operators each category contributes (rules 1-3 of the module docstring)."""
    n = sum(sizes.values())
    total = min(total, n)
    quota = {c: total * k / n for c, k in sizes.items()}
    floor = {c: min(sizes[c], max(1, named.get(c, 0))) for c in sizes}
    take = {c: min(sizes[c], max(floor[c], math.floor(quota[c]))) for c in sizes}
    while sum(take.values()) < total:
        open_ = [c for c in sizes if take[c] < sizes[c]]
        c = max(open_, key=lambda c: (quota[c] - take[c], [-ord(x) for x in c]))
        take[c] += 1
    while sum(take.values()) > total:
        above = [c for c in sizes if take[c] > floor[c]]
        if not above:
            break
        c = min(above, key=lambda c: (quota[c] - take[c], c))
        take[c] -= 1
    return take


def level2_selection(operators: Iterable[Operator], named: Sequence[str] = PAPER_LEVEL2_NAMED,
                     total: int = LEVEL2_COUNT) -> tuple[str, ...]:
    """The Level-2 operators of the subset (module docstring), sorted by category then name."""
    by_cat: dict[str, list[str]] = {}
    for op in operators:
        if op.level == 2:
            by_cat.setdefault(op.category, []).append(op.name)
    wanted = set(named)
    counts = {c: sum(1 for n in names if n in wanted) for c, names in by_cat.items()}
    take = allotments({c: len(v) for c, v in by_cat.items()}, counts, total)
    chosen: list[str] = []
    for c in sorted(by_cat):
        order = sorted(by_cat[c], key=lambda n: (n not in wanted, _hash_order(n)))
        chosen += sorted(order[:take[c]])
    return tuple(chosen)


def paper_subset(operators: Iterable[Operator]) -> Subset:
    """The paper's subset of the given benchmark operators."""
    ops = list(operators)
    have = {o.name for o in ops}
    level1 = tuple(n for n in PAPER_LEVEL1 if n in have)
    level3 = tuple(sorted(o.name for o in ops if o.level == 3))
    level2 = level2_selection(ops)
    missing = tuple(n for n in PAPER_LEVEL1 + PAPER_LEVEL2_NAMED if n not in have)
    return Subset(level1, level2, level3, missing)
