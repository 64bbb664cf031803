"""Level and category from a benchmark's directory layout.

Layouts met in the wild, all handled:

- KernelBench: ``level1/19_ReLU.py`` (also ``level_1``, ``L1``, ``1``);
- MultiKernelBench: ``reference/<category>/<op>.py`` (categories as folders, no levels);
- combinations: ``level2/normalization/layer_norm.py``, and one folder per operator
  (``activation/gelu/gelu.py`` next to ``gelu.json``): a folder named like the file is skipped.

The level is the nearest ancestor folder that names one; without one the task is level 1 and the
record says so (`Task.layout_note`). The category is the nearest folder between the level folder
(or the loaded root) and the file that is not the level folder and not the per-operator folder;
without one it is guessed from the name (`infer.guess_category`).
"""

from __future__ import annotations

import re
from pathlib import Path

_LEVEL = re.compile(r"(?:level[_\-]?|l)?([123])", re.IGNORECASE)

#: Folder names that are containers, never categories.
_NOT_CATEGORIES = frozenset(("reference", "references", "tasks", "task", "problems", "kernelbench",
                             "multikernelbench", "npukernelbench", "benchmark", "benchmarks", "src", "ops"))

#: Category folders recognised even without a loaded root (MultiKernelBench and NPUKernelBench names).
KNOWN_CATEGORIES = frozenset((
    "activation", "broadcast", "convolution", "fuse", "fused", "index", "loss", "math", "matmul",
    "normalization", "optimizer", "pooling", "reduce", "reduction", "resize", "arch", "attention",
    "comparison", "condition", "quantization", "tensor_creation", "elementwise", "communication",
))


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def level_of(path: Path, root: Path | None = None) -> int | None:
    names = _ancestors(path, root) + ([root.resolve().name] if root is not None else [])
    for folder in names:
        m = _LEVEL.fullmatch(folder)
        if m:
            return int(m.group(1))
    return None


def category_of(path: Path, root: Path | None = None) -> str | None:
    stem = _norm(re.sub(r"^\d+[_\-\s]*", "", path.stem))
    for folder in _ancestors(path, root):
        if _LEVEL.fullmatch(folder):
            return None  # reached the level folder: nothing between it and the file
        low = folder.lower()
        if _norm(folder) in (stem, _norm(path.stem)) or low in _NOT_CATEGORIES:
            continue
        if root is not None or low in KNOWN_CATEGORIES:
            return low
        return None
    return None


def _ancestors(path: Path, root: Path | None) -> list[str]:
    """Folder names from the file's parent upwards (stopping at `root`, at most 4 up without one)."""
    parents = list(path.resolve().parents)
    if root is not None:
        root = root.resolve()
        if root in parents:
            return [p.name for p in parents[: parents.index(root)]]
    return [p.name for p in parents[:4]]
