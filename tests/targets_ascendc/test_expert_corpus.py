"""NPUKernelBench's expert answers through every static check: zero false rejections.

Runs where a checkout is present (SAGE_NPUKERNELBENCH=<its root>; it is never part of SAGE), and
skips with that reason otherwise. Slow (153 operators, a few minutes on a loaded 2-core box): marked
`slow`. The checks' own classes are covered without the corpus by test_integrity.py.
"""

from __future__ import annotations

import pytest

from sagekernel.targets.ascendc.expert_corpus import (
    ENV_VAR,
    check_corpus,
    corpus_root,
    evaluated_sizes,
    summary,
)


@pytest.fixture(scope="module")
def root():
    found = corpus_root()
    if found is None:
        pytest.skip(f"no NPUKernelBench checkout: set {ENV_VAR} to its root (with tasks/)")
    return found


@pytest.mark.slow
def test_expert_answers_pass_every_static_check(root):
    report = summary(check_corpus(root))
    assert report["checked"] == report["operators"] >= 150, report["skipped"]
    assert report["false_rejections"] == 0, report["rejected"]


def test_sizes_table_reads_the_csv(tmp_path):
    csv = tmp_path / "test_cases.csv"
    csv.write_text("case_id;shape;dtype\n0;[4, 3];float16\n1;[33, 1531];float32\n2;[32, 64];float32\n")
    sizes = evaluated_sizes(csv)
    assert set(sizes) == {33, 1531, 33 * 1531}  # 4, 3, powers of two are ordinary constants
