"""NPUKernelBench's case table and root configuration, read the way the benchmark reads them.

The benchmark reads ``validation/test_cases.csv`` with ``pandas.read_csv(path, sep=';')`` and then
``preprocess_dataframe`` (a numeric column without gaps whose values are all integral becomes int),
and hands each row to ``get_inputs(param)`` / ``get_init_inputs(param)`` /
``custom_check_precision(param, ...)``, which read it with ``param.get(name, default)`` and
``param[name]``. `read_cases` gives the same values without pandas: per column, int when every
cell parses as an integral number, float when every cell parses as a number (an empty cell is NaN),
bool for True/False columns, else the text. A `CaseRow` is a dict with the same lookups.

``base_config.yaml`` at the repository root holds the default tolerances of the benchmark's
correctness rule (``eval.max_abs_error`` / ``eval.max_rel_error``); `root_tolerances` reads them
(a two-key lookup, so no YAML dependency) and falls back to the published 0.001 / 0.001.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

#: The tolerances `base_config.yaml` publishes (V2.0): used when the root has no config.
PUBLISHED_MAX_ABS_ERROR = 0.001
PUBLISHED_MAX_REL_ERROR = 0.001

Cell = int | float | bool | str


class CaseRow(dict[str, Cell]):
    """One case: column name -> value, typed per column like the benchmark's DataFrame row."""

    @property
    def case_id(self) -> str:
        return str(self.get("case_id", ""))


def _number(text: str) -> float | None:
    if text.strip() == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        return None


def _column_values(cells: list[str]) -> list[Cell]:
    """Type one column as pandas + preprocess_dataframe would."""
    stripped = [c.strip() for c in cells]
    if stripped and all(c in ("True", "False", "true", "false", "TRUE", "FALSE") for c in stripped):
        return [c.lower() == "true" for c in stripped]
    numbers = [_number(c) for c in cells]
    if all(n is not None for n in numbers):
        values = [float(n) for n in numbers if n is not None]
        if all(not math.isnan(v) and v == int(v) for v in values):
            return [int(v) for v in values]
        return list(values)
    return [c if c != "" else math.nan for c in cells]  # pandas reads an empty text cell as NaN


def read_cases(path: Path) -> list[CaseRow]:
    """The rows of a ``;``-separated case table, typed per column (module docstring)."""
    text = Path(path).read_text(encoding="utf-8")
    rows = [r for r in csv.reader(text.splitlines(), delimiter=";") if any(c.strip() for c in r)]
    if not rows:
        return []
    header = [h.strip() for h in rows[0]]
    body = [r + [""] * (len(header) - len(r)) for r in rows[1:]]
    columns = {name: _column_values([r[i] for r in body]) for i, name in enumerate(header)}
    return [CaseRow({name: columns[name][k] for name in header}) for k in range(len(body))]


@dataclass(frozen=True)
class Tolerances:
    """The benchmark's default correctness rule: an element fails when its absolute error exceeds
    `max_abs_error` AND its relative error exceeds `max_rel_error`."""

    max_abs_error: float = PUBLISHED_MAX_ABS_ERROR
    max_rel_error: float = PUBLISHED_MAX_REL_ERROR
    source: str = "published defaults (base_config.yaml V2.0)"


def root_tolerances(root: Path | None) -> Tolerances:
    """``eval.max_abs_error`` / ``eval.max_rel_error`` from ``<root>/base_config.yaml``."""
    config = Path(root) / "base_config.yaml" if root is not None else None
    if config is None or not config.is_file():
        return Tolerances()
    text = config.read_text(encoding="utf-8", errors="replace")
    eval_block = re.search(r"^eval:\s*\n((?:[ \t]+.*\n?|\s*\n)*)", text, re.MULTILINE)
    block = eval_block.group(1) if eval_block else ""
    found = {}
    for key in ("max_abs_error", "max_rel_error"):
        m = re.search(rf"^[ \t]+{key}:\s*([-+0-9.eE]+)", block, re.MULTILINE)
        if m:
            found[key] = float(m.group(1))
    return Tolerances(found.get("max_abs_error", PUBLISHED_MAX_ABS_ERROR),
                      found.get("max_rel_error", PUBLISHED_MAX_REL_ERROR), str(config))
