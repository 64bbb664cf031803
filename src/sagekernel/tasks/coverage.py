"""What a task declares about its valid inputs, so the harness can cover them (issue 21).

A ``SAGE_TASK`` file may add these keys (all optional; a file without them gets the generic trials
only, and nothing is guessed):

- ``size_rules``: ``{symbol: {"multiple_of": m, "min": lo, "max": hi, "fixed": bool}}``. The
  held-out shape generator (tasks/sizegen.py) draws only sizes that satisfy them (e.g. an even head
  dimension: ``{"D": {"multiple_of": 2}}``); ``fixed`` keeps the published value.
- ``attr_domains``: ``{attr: {"range": [lo, hi], "bind": "MODULE_VAR"}}``. The attributes trial
  draws each attribute uniformly from its range (an int attr draws ints) and rebinds the module
  variable ``bind`` (default: the attr's name in upper case, which must hold the attr's value) so
  ``get_init_inputs()`` builds the reference with the drawn value.
- ``special_values``: ``True`` (every floating-point input that is not structured), a list of kinds,
  or ``{input: [kinds]}``; kinds are `SPECIAL_KINDS` (``nan``, ``inf``, ``signed_zero``,
  ``subnormal``). Declare only kinds whose result the op defines without depending on evaluation
  order (see docs/task_formats.md); the special-values trial plants them in those inputs.
- ``ties``: ``True`` (the same inputs as above) or a list of inputs: the ties trial draws them from a
  few repeated values (argmax/max/sort ties, rounding halfway cases).
- ``structured_domains``: ``{structured_input: domain}`` with domain in `STRUCTURED_DOMAINS`: that
  structured input is no longer kept as ``get_inputs()`` made it on the non-default distributions,
  but re-drawn within its domain (a rope table whose halves differ).
- ``edge_cases``: a list of names; the file's ``make_inputs(sizes, gen, name)`` must accept each
  name as a distribution, and each gets its own trial (e.g. an empty last group).

Everything here is parsed and checked statically (`parse_coverage`); metadata.py checks the
dynamic parts (bound module variables, make_inputs names) against one run of the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagekernel.errors import TaskError

#: Special IEEE values a task may declare valid inputs.
SPECIAL_KINDS = ("nan", "inf", "signed_zero", "subnormal")
#: Domains a structured input may be re-drawn in.
STRUCTURED_DOMAINS = ("real", "positive", "unit_interval")
#: The SAGE_TASK keys this module owns.
COVERAGE_KEYS = ("size_rules", "attr_domains", "special_values", "ties", "structured_domains",
                 "edge_cases")


@dataclass(frozen=True)
class SizeRule:
    """Which values a size symbol may take in a held-out shape."""

    multiple_of: int = 1
    min: int = 1
    max: int | None = None
    fixed: bool = False

    def allows(self, value: int) -> bool:
        return (value >= self.min and (self.max is None or value <= self.max)
                and value % self.multiple_of == 0)


@dataclass(frozen=True)
class AttrDomain:
    """The range an attribute is drawn from, and the module variable that carries it."""

    low: float
    high: float
    integer: bool
    bind: str


@dataclass(frozen=True)
class Coverage:
    size_rules: dict[str, SizeRule] = field(default_factory=dict)
    attr_domains: dict[str, AttrDomain] = field(default_factory=dict)
    special_values: dict[str, tuple[str, ...]] = field(default_factory=dict)  # input -> kinds
    ties: tuple[str, ...] = ()
    structured_domains: dict[str, str] = field(default_factory=dict)
    edge_cases: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "size_rules": {k: vars(v).copy() for k, v in self.size_rules.items()},
            "attr_domains": {k: vars(v).copy() for k, v in self.attr_domains.items()},
            "special_values": {k: list(v) for k, v in self.special_values.items()},
            "ties": list(self.ties), "structured_domains": dict(self.structured_domains),
            "edge_cases": list(self.edge_cases),
        }

    @staticmethod
    def from_json(d: Mapping[str, Any] | None) -> Coverage:
        if not d:
            return Coverage()
        return Coverage(
            {k: SizeRule(**v) for k, v in d.get("size_rules", {}).items()},
            {k: AttrDomain(**v) for k, v in d.get("attr_domains", {}).items()},
            {k: tuple(v) for k, v in d.get("special_values", {}).items()},
            tuple(d.get("ties", ())), dict(d.get("structured_domains", {})), tuple(d.get("edge_cases", ())),
        )


def _fail(path: Path, message: str) -> TaskError:
    return TaskError(f"{path}: {message}")


def _positive_int(path: Path, value: object, what: str, minimum: int = 1) -> int:
    if type(value) is not int or value < minimum:
        raise _fail(path, f"{what} must be an int >= {minimum}, got {value!r}")
    return value


def _size_rules(path: Path, raw: object, sizes: Mapping[str, int]) -> dict[str, SizeRule]:
    if not isinstance(raw, dict):
        raise _fail(path, "SAGE_TASK['size_rules'] must be a dict of size symbol -> rule dict")
    rules = {}
    for sym, rule in raw.items():
        if sym not in sizes:
            raise _fail(path, f"size_rules names unknown size symbol {sym!r} (known: {', '.join(sizes)})")
        if not isinstance(rule, dict) or set(rule) - {"multiple_of", "min", "max", "fixed"}:
            raise _fail(path, f"size_rules[{sym!r}] must be a dict with keys multiple_of, min, max, fixed; "
                        f"got {rule!r}")
        fixed = rule.get("fixed", False)
        if not isinstance(fixed, bool):
            raise _fail(path, f"size_rules[{sym!r}]['fixed'] must be True or False")
        made = SizeRule(
            _positive_int(path, rule.get("multiple_of", 1), f"size_rules[{sym!r}]['multiple_of']"),
            _positive_int(path, rule.get("min", 1), f"size_rules[{sym!r}]['min']"),
            None if rule.get("max") is None
            else _positive_int(path, rule["max"], f"size_rules[{sym!r}]['max']"),
            fixed,
        )
        if not made.allows(sizes[sym]):
            raise _fail(path, f"size {sym}'s published value {sizes[sym]} breaks its own size_rules {rule}")
        rules[sym] = made
    return rules


def _attr_domains(path: Path, raw: object, attrs: Mapping[str, float | int]) -> dict[str, AttrDomain]:
    if not isinstance(raw, dict):
        raise _fail(path, "SAGE_TASK['attr_domains'] must be a dict of attr -> {'range': [lo, hi]}")
    out = {}
    for name, dom in raw.items():
        if name not in attrs:
            raise _fail(path, f"attr_domains names unknown attr {name!r} "
                        f"(known: {', '.join(attrs) or 'none'})")
        if not isinstance(dom, dict) or set(dom) - {"range", "bind"} or "range" not in dom:
            raise _fail(path, f"attr_domains[{name!r}] must be {{'range': [lo, hi], 'bind': 'VAR'}}, "
                        f"got {dom!r}")
        rng = dom["range"]
        if (not isinstance(rng, (list, tuple)) or len(rng) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in rng)
                or not rng[0] <= rng[1]):
            raise _fail(path, f"attr_domains[{name!r}]['range'] must be [lo, hi] with lo <= hi, got {rng!r}")
        value = attrs[name]
        if not rng[0] <= value <= rng[1]:
            raise _fail(path, f"attr {name}'s published value {value} is outside its domain {list(rng)}")
        bind = dom.get("bind", name.upper())
        if not isinstance(bind, str) or not bind.isidentifier():
            raise _fail(path, f"attr_domains[{name!r}]['bind'] must name a module variable, got {bind!r}")
        out[name] = AttrDomain(float(rng[0]), float(rng[1]), isinstance(value, int), bind)
    return out


def _input_list(path: Path, raw: object, key: str, candidates: list[str], inputs: list[str]) -> list[str]:
    if raw is True:
        return list(candidates)
    if not isinstance(raw, (list, tuple)) or any(n not in inputs for n in raw):
        raise _fail(path, f"SAGE_TASK[{key!r}] must be True or a list of input names "
                    f"({', '.join(inputs)}), got {raw!r}")
    return list(raw)


def _kinds(path: Path, raw: object, what: str) -> tuple[str, ...]:
    if raw is True:
        return SPECIAL_KINDS
    if not isinstance(raw, (list, tuple)) or not raw or any(k not in SPECIAL_KINDS for k in raw):
        raise _fail(path, f"{what} must be True or a non-empty list of {', '.join(SPECIAL_KINDS)}; "
                    f"got {raw!r}")
    return tuple(raw)


def parse_coverage(path: Path, meta: Mapping[str, Any], sizes: Mapping[str, int],
                   attrs: Mapping[str, float | int], inputs: list[str], structured: list[str]) -> Coverage:
    """The coverage declarations of a SAGE_TASK dict (static checks only). `inputs` are all input
    names; the default set for `True` is the inputs that are not structured."""
    plain = [n for n in inputs if n not in structured]
    special: dict[str, tuple[str, ...]] = {}
    raw_special = meta.get("special_values")
    if isinstance(raw_special, dict):
        for name, kinds in raw_special.items():
            if name not in inputs:
                raise _fail(path, f"special_values names unknown input {name!r} "
                            f"(inputs: {', '.join(inputs)})")
            special[name] = _kinds(path, kinds, f"special_values[{name!r}]")
    elif raw_special is not None and raw_special is not False:
        kinds = _kinds(path, raw_special, "SAGE_TASK['special_values']")
        special = {n: kinds for n in plain}
    raw_ties = meta.get("ties")
    ties = () if raw_ties in (None, False) else tuple(_input_list(path, raw_ties, "ties", plain, inputs))
    raw_struct = meta.get("structured_domains", {})
    if not isinstance(raw_struct, dict) or any(
            n not in structured or d not in STRUCTURED_DOMAINS for n, d in raw_struct.items()):
        raise _fail(path, "SAGE_TASK['structured_domains'] must map structured inputs "
                    f"({', '.join(structured) or 'none declared'}) to one of "
                    f"{', '.join(STRUCTURED_DOMAINS)}; "
                    f"got {raw_struct!r}")
    edges = meta.get("edge_cases", [])
    if not isinstance(edges, list) or not all(isinstance(e, str) and e.isidentifier() for e in edges):
        raise _fail(path, f"SAGE_TASK['edge_cases'] must be a list of identifier names, got {edges!r}")
    return Coverage(
        _size_rules(path, meta.get("size_rules", {}), sizes),
        _attr_domains(path, meta.get("attr_domains", {}), attrs),
        special, ties, dict(raw_struct), tuple(edges),
    )


__all__ = [
    "COVERAGE_KEYS",
    "SPECIAL_KINDS",
    "STRUCTURED_DOMAINS",
    "AttrDomain",
    "Coverage",
    "SizeRule",
    "parse_coverage",
]
