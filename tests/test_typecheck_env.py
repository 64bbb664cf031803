"""The type check's verdict must not depend on which optional extras are installed (see pyproject's
`[[tool.mypy.overrides]]` and scripts/typecheck.py). This keeps the opaque list complete: every
third-party module that `src/` imports is a core dependency, comes with the `dev` extra (always
present where mypy runs), or is listed as opaque. A new optional import that is none of these fails
here, before it can make CI's verdict depend on the machine."""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import typecheck  # noqa: E402


def _requirement_name(req: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0].lower().replace("_", "-")


def _always_installed(declared: list[str]) -> set[str]:
    """The declared distributions and everything they require unconditionally (no `extra ==`)."""
    todo, seen = [_requirement_name(r) for r in declared], set()
    while todo:
        dist = todo.pop()
        if dist in seen:
            continue
        seen.add(dist)
        try:
            reqs = metadata.requires(dist) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_requirement_name(r) for r in reqs if "extra ==" not in r and "extra==" not in r]
    return seen


@functools.cache
def _top_level_of() -> dict[str, list[str]]:
    return metadata.packages_distributions()


def _import_names(dist: str) -> set[str]:
    names = {dist.replace("-", "_")}
    for top, dists in _top_level_of().items():
        if any(d.lower().replace("_", "-") == dist for d in dists):
            names.add(top)
    return names


def third_party_imports() -> dict[str, str]:
    """Top-level module -> first file importing it, over every Python file under src/.

    Files that run as standalone scripts (sandbox and runtime children) import other files of the
    package by their bare names from a folder put on sys.path; those are local, not third-party."""
    local = {p.stem for p in (ROOT / "src").rglob("*.py")}
    found: dict[str, str] = {}
    for path in sorted((ROOT / "src").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                    else [])
            for mod in mods:
                top = mod.split(".")[0]
                if top not in sys.stdlib_module_names and top != "sagekernel" and top not in local:
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def test_every_optional_import_is_opaque_to_mypy() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [*cfg["dependencies"], *cfg["optional-dependencies"]["dev"]]
    always_present: set[str] = set()
    for dist in _always_installed(declared):
        always_present |= _import_names(dist)
    opaque = typecheck.opaque_modules()
    missing = {m: f for m, f in third_party_imports().items() if m not in always_present | opaque}
    assert not missing, (
        "optional imports mypy would see only where they are installed; add them to the opaque list "
        f"in pyproject's [[tool.mypy.overrides]]: {missing}")


def test_opaque_list_names_nothing_the_type_check_always_has() -> None:
    """An always-installed package in the opaque list would silently lose its type checking."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for req in [*cfg["dependencies"], *cfg["optional-dependencies"]["dev"]]:
        assert not (_import_names(_requirement_name(req)) & typecheck.opaque_modules()), req


def test_hidden_python_cannot_import_the_hidden_packages(tmp_path: Path) -> None:
    """The second condition of scripts/typecheck.py really hides what it says, and keeps the rest."""
    import subprocess

    python = typecheck.hidden_python(tmp_path, {"numpy"})
    probe = ("import importlib.util as u; print(u.find_spec('numpy') is None, "
             "u.find_spec('torch') is not None, u.find_spec('json') is not None)")
    out = subprocess.check_output([str(python), "-c", probe], text=True).split()
    assert out == ["True", "True", "True"]
    assert importlib.util.find_spec("numpy") is not None  # hidden there, not uninstalled here
