"""A `Task` as plain JSON, and back: how a task crosses a process boundary; and `LoadProblem`,
what crosses it instead when a file does not load.

The isolated loader's child sends its tasks this way, and a harness child that needs the task
(the timing server) can be given `task_to_json(task)` instead of rebuilding a Task field by field.
Paths travel as strings; `task_from_json(data, source_path=...)` rebases the task file and its
companion files onto a private copy of the task's folder (keeping their paths relative to it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sagekernel.tasks.coverage import Coverage
from sagekernel.tasks.task import BenchmarkSpec, ForwardArg, InputGroup, Task, TensorSpec

RECORD_VERSION = 1


@dataclass(frozen=True)
class LoadProblem:
    """One file that could not be loaded, and why.

    `kind`: "rejected" (the file is wrong, or over budget: the message says how to make it load),
    "needs_device" (it imports or asks for a device this machine lacks), "timeout", "memory" or
    "crashed" (its reference hung, ran out of its memory limit, or killed the loading child).
    """

    path: Path
    message: str
    kind: str = "rejected"
    device: str = ""


def _spec(t: TensorSpec) -> dict[str, Any]:
    return {"name": t.name, "dims": list(t.dims), "dtype": t.dtype, "origin": t.origin}


def _arg(a: ForwardArg) -> dict[str, Any]:
    return {"kind": a.kind, "name": a.name, "value": list(a.value) if isinstance(a.value, tuple) else a.value}


def task_to_json(task: Task) -> dict[str, Any]:
    return {
        "record_version": RECORD_VERSION,
        "name": task.name, "level": task.level, "category": task.category,
        "description": task.description, "source_path": str(task.source_path), "dtype": task.dtype,
        "inputs": [_spec(t) for t in task.inputs], "outputs": [_spec(t) for t in task.outputs],
        "params": [_spec(t) for t in task.params],
        "attrs": dict(task.attrs), "sizes": dict(task.sizes), "variants": [dict(v) for v in task.variants],
        "atol": task.atol, "rtol": task.rtol,
        "reference_kernels": {k: str(v) for k, v in task.reference_kernels.items()},
        "forward_args": [_arg(a) for a in task.forward_args],
        "groups": [{"name": g.name, "index": g.index, "inputs": [_spec(t) for t in g.inputs],
                    "outputs": [_spec(t) for t in g.outputs], "sizes": dict(g.sizes), "attrs": dict(g.attrs),
                    "forward_args": [_arg(a) for a in g.forward_args]} for g in task.groups],
        "group_index": task.group_index,
        "companion_files": [str(p) for p in task.companion_files],
        "published_sizes": dict(task.published_sizes), "size_note": task.size_note,
        "size_tuples": {k: list(v) for k, v in task.size_tuples.items()},
        "scaled_ints": dict(task.scaled_ints),
        "layout_note": task.layout_note,
        "specification": task.specification,
        "benchmark": asdict(task.benchmark) if task.benchmark is not None else None,
        "coverage": task.coverage.to_json(), "attr_binding": dict(task.attr_binding),
    }


def _unspec(d: dict[str, Any]) -> TensorSpec:
    return TensorSpec(d["name"], tuple(d["dims"]), d["dtype"], d.get("origin", "input"))


def _unarg(d: dict[str, Any]) -> ForwardArg:
    value = d.get("value")
    return ForwardArg(d["kind"], d["name"], tuple(value) if isinstance(value, list) else value)


def task_from_json(data: dict[str, Any], source_path: Path | None = None) -> Task:
    """The Task back; with `source_path`, the task file (and companions, same relative place) moved there."""
    original = Path(data["source_path"])
    new_source = Path(source_path) if source_path is not None else original

    def moved(p: str) -> Path:
        path = Path(p)
        if source_path is None:
            return path
        try:
            return new_source.parent / path.relative_to(original.parent)
        except ValueError:
            return path

    return Task(
        name=data["name"], level=int(data["level"]), category=data["category"],
        description=data.get("description", ""), source_path=new_source,
        inputs=[_unspec(t) for t in data["inputs"]], outputs=[_unspec(t) for t in data["outputs"]],
        attrs=dict(data.get("attrs", {})), sizes={k: int(v) for k, v in data.get("sizes", {}).items()},
        variants=[dict(v) for v in data.get("variants", [])], dtype=data.get("dtype", "float32"),
        atol=float(data.get("atol", 1e-2)), rtol=float(data.get("rtol", 1e-2)),
        reference_kernels={k: Path(v) for k, v in data.get("reference_kernels", {}).items()},
        params=[_unspec(t) for t in data.get("params", [])],
        forward_args=[_unarg(a) for a in data.get("forward_args", [])],
        groups=[InputGroup(g["name"], [_unspec(t) for t in g["inputs"]], [_unspec(t) for t in g["outputs"]],
                           {k: int(v) for k, v in g["sizes"].items()}, dict(g["attrs"]),
                           [_unarg(a) for a in g["forward_args"]], int(g.get("index", 0)))
                for g in data.get("groups", [])],
        group_index=data.get("group_index"),
        companion_files=[moved(p) for p in data.get("companion_files", [])],
        published_sizes=dict(data.get("published_sizes", {})), size_note=data.get("size_note", ""),
        size_tuples={k: tuple(int(x) for x in v) for k, v in data.get("size_tuples", {}).items()},
        scaled_ints={k: int(v) for k, v in data.get("scaled_ints", {}).items()},
        layout_note=data.get("layout_note", ""),
        specification=data.get("specification", ""),
        benchmark=BenchmarkSpec(**data["benchmark"]) if data.get("benchmark") else None,
        coverage=Coverage.from_json(data.get("coverage")), attr_binding=dict(data.get("attr_binding", {})),
    )
