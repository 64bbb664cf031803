"""Targets by short name, found through the entry-point group `sagekernel.targets`.

The package's own targets are declared in pyproject.toml like any plug-in's; the built-in table
below is the fallback when the package runs from a source tree without installed metadata.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module, metadata
from typing import TYPE_CHECKING

from sagekernel.errors import SageError

if TYPE_CHECKING:
    from sagekernel.protocols import Target

ENTRY_POINT_GROUP = "sagekernel.targets"
#: name -> "module:Class" for the package's own targets (also declared as entry points).
BUILTIN: dict[str, str] = {
    "cpu": "sagekernel.targets.cpu.target:CpuTarget",
    "ascendc": "sagekernel.targets.ascendc.target:AscendCTarget",
    "triton": "sagekernel.targets.triton.target:TritonTarget",
    "cuda": "sagekernel.targets.cuda.target:CudaTarget",
}
_INSTANCES: dict[str, Target] = {}


class UnknownTarget(SageError):
    """No target is registered under that name."""


def _registry() -> dict[str, str]:
    found = dict(BUILTIN)
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = ep.value
    return found


def target_names() -> list[str]:
    return sorted(_registry())


def get_target(name: str) -> Target:
    """The target registered as `name` (one shared instance per name)."""
    registry = _registry()
    if name not in registry:
        raise UnknownTarget(f"unknown target {name!r}; available: {', '.join(sorted(registry))}")
    if name not in _INSTANCES:
        module_name, cls_name = registry[name].split(":")
        factory: Callable[[], Target] = getattr(import_module(module_name), cls_name)
        _INSTANCES[name] = factory()
    return _INSTANCES[name]


__all__ = ["ENTRY_POINT_GROUP", "UnknownTarget", "get_target", "target_names"]
