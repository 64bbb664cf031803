"""The layers of docs/ARCHITECTURE.md, enforced on the imports: a module imports only from lower
layers (or its own package). Siblings on one layer do not import each other, except the edges
listed in ALLOWED with the reason. Static (ast over src/), so it also sees imports inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "sagekernel"

#: The layer of each package or top-level module; lower numbers are lower layers.
LAYERS: dict[str, int] = {
    **dict.fromkeys(("errors", "defaults", "__init__", "watchdog"), 0),
    **dict.fromkeys(("limits", "terminal", "records", "db", "candidate", "devices"), 1),
    **dict.fromkeys(("models", "seam", "sandbox", "diagnostics_seam", "metrics"), 2),
    "tasks": 3,
    "protocols": 4,
    **dict.fromkeys(("harness", "targets", "memory"), 5),
    "agent": 6,
    **dict.fromkeys(("runner", "selfcheck"), 7),
    "report": 8,
    **dict.fromkeys(("mcp_server", "experiment"), 9),
    "cli": 10,
}

#: Edges that break the picture on purpose, by importing module.
ALLOWED: dict[tuple[str, str], str] = {
    ("targets.ascendc.calibrate", "harness"): "judges the reference on the NPU with the harness comparator",
    ("models.oracle", "tasks"): "the synthetic oracle's ground truth is the suite's hand-written kernels",
    ("models.oracle", "targets"): "the oracle's wrong kernels are the CPU target's null-kernel canaries",
}


def unit(module: str) -> str:
    """`sagekernel.harness.trials` -> `harness`; `sagekernel.errors` -> `errors`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and not parts[1].startswith("__") else "__init__"


def imports() -> list[tuple[str, str]]:
    """(importing module, imported module) for every sagekernel import in the package."""
    edges = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        me = ".".join(rel.parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sagekernel"):
                edges.append((me, node.module))
                if node.module == "sagekernel":  # `from sagekernel import defaults`
                    edges += [(me, f"sagekernel.{a.name}") for a in node.names]
            elif isinstance(node, ast.Import):
                edges += [(me, a.name) for a in node.names if a.name.startswith("sagekernel")]
    return edges


def violations(edges: list[tuple[str, str]]) -> list[str]:
    bad = []
    for me, other in edges:
        a, b = unit(me), unit(other)
        if a == b or b == "__init__" or other == "sagekernel":
            continue
        short = me.removeprefix("sagekernel.")
        if (short, b) in ALLOWED:
            continue
        if a not in LAYERS or b not in LAYERS:
            bad.append(f"{me} -> {other}: {a if a not in LAYERS else b} has no layer in LAYERS")
        elif LAYERS[b] >= LAYERS[a]:
            bad.append(f"{me} -> {other}: layer {LAYERS[a]} imports layer {LAYERS[b]}")
    return sorted(set(bad))


def test_imports_only_point_down() -> None:
    edges = imports()
    assert len(edges) > 300
    assert violations(edges) == []


def test_the_check_catches_an_upward_and_a_sibling_import() -> None:
    assert violations([("sagekernel.harness.trials", "sagekernel.runner.run")])
    assert violations([("sagekernel.harness.trials", "sagekernel.targets.cpu")])
    assert violations([("sagekernel.newpkg.x", "sagekernel.errors")])  # a package with no layer
    assert not violations([("sagekernel.runner.run", "sagekernel.harness.trials")])


def test_every_allowed_exception_is_still_used() -> None:
    used = {(me.removeprefix("sagekernel."), unit(other)) for me, other in imports()}
    assert set(ALLOWED) <= used, set(ALLOWED) - used
