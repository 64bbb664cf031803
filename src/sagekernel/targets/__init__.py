"""Targets by short name (architecture.md: "cpu", later "triton", "cuda", "ascendc")."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

from sagekernel.errors import SageError
from sagekernel.protocols import Target

#: name -> "module:Class", imported on first use.
_REGISTRY: dict[str, str] = {"cpu": "sagekernel.targets.cpu.target:CpuTarget"}
_INSTANCES: dict[str, Target] = {}


class UnknownTarget(SageError):
    """No target is registered under that name."""


def target_names() -> list[str]:
    return sorted(_REGISTRY)


def get_target(name: str) -> Target:
    """The target registered as `name` (one shared instance per name)."""
    if name not in _REGISTRY:
        raise UnknownTarget(f"unknown target {name!r}; available: {', '.join(target_names())}")
    if name not in _INSTANCES:
        module_name, cls_name = _REGISTRY[name].split(":")
        factory: Callable[[], Target] = getattr(import_module(module_name), cls_name)
        _INSTANCES[name] = factory()
    return _INSTANCES[name]


__all__ = ["UnknownTarget", "get_target", "target_names"]
