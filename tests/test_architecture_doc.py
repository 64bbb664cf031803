"""docs/ARCHITECTURE.md stays true: every module, template or doc it names exists, and the layer
picture it draws is the one the imports follow (tests/test_import_layers.py checks the imports)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "sagekernel"
DOC = ROOT / "docs" / "ARCHITECTURE.md"

#: A backticked name that looks like a path: ends in a file suffix or a slash.
PATH = re.compile(r"`([A-Za-z0-9_<>*./-]+(?:\.py|\.j2|\.md|\.sql|/))(?::[^`]*)?`")


def named_paths(text: str) -> list[str]:
    return sorted({m.group(1) for m in PATH.finditer(text)})


def exists(name: str) -> bool:
    pattern = name.replace("<name>", "*").replace("NNNN", "[0-9][0-9][0-9][0-9]").rstrip("/")
    bases = [ROOT] if pattern.startswith(("docs/", "tests/", "scripts/", "benchmarks/")) else [PACKAGE]
    return any(any(base.glob(pattern)) for base in bases)


def test_every_path_the_page_names_exists() -> None:
    names = named_paths(DOC.read_text())
    assert len(names) > 40  # the page names the modules of a round and the homes of the rules
    missing = [n for n in names if not exists(n)]
    assert missing == [], f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"


def test_the_checker_notices_a_path_that_does_not_exist() -> None:
    assert exists("harness/evaluate.py") and exists("targets/<name>/lint.py")
    assert exists("migrations/NNNN_*.sql") and exists("docs/harness.md")
    assert not exists("harness/no_such_module.py") and not exists("targets/<name>/no_such.py")


def test_every_package_is_on_the_page() -> None:
    text = DOC.read_text()
    packages = [p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()]
    assert packages
    missing = [p for p in packages if p not in ("migrations", "prompts") and f"{p}/" not in text]
    assert missing == [], f"packages the page does not place in a layer: {missing}"
