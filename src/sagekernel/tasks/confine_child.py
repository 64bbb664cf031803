"""The sandboxed task child of tasks/task_child.py (``python -m sagekernel.tasks.confine_child``): runs
the task code the harness asks for -- inputs, parameters, references, init arguments, module ints,
the benchmark's own precision rule -- one request at a time, and answers each with a typed frame
(tasks/frames.py). It is the only process that imports a task file while the harness judges it.

Requests come on stdin; answers go to the result fd the parent passed. Between requests every
process a task file started is killed (the child is a subreaper), so nothing outlives a call.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from sagekernel.errors import TaskError
from sagekernel.tasks.frames import decode_tensors, encode, sizes_of
from sagekernel.tasks.isolate_child import _bind_to_parent, _kill_descendants

#: What torch and the loader say when an allocation fails under the data-segment limit.
MEMORY_MESSAGES = ("can't allocate memory", "ran out of memory")


def _read_exact(stream: Any, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _jsonable(value: Any, tensors: list[Any]) -> Any:
    """`value` as JSON; tensors travel beside it (``{"tensor": i}``), anything else is opaque."""
    import torch

    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return {"tensor": len(tensors) - 1}
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, list | tuple):
        return {"list": [_jsonable(v, tensors) for v in value], "tuple": isinstance(value, tuple)}
    return {"opaque": type(value).__name__}


def handle(op: str, task: Any, args: dict[str, Any], tensors: list[Any]) -> tuple[dict[str, Any], list[Any]]:
    """Run one request in this process (the task module is cached here across requests)."""
    from sagekernel.tasks import reference
    from sagekernel.tasks.inputs import build_inputs

    sizes = args.get("sizes")
    if op == "trial":
        parts = reference.trial_tensors(task, dict(sizes or {}), int(args["seed"]), str(args["distribution"]),
                                        int(args["param_seed"]))
        return ({"counts": [len(p or []) for p in parts], "none": parts[3] is None},
                [t for p in parts for t in (p or [])])
    if op == "checked":
        expected, declared = reference.checked_outputs(task, tensors, dict(sizes or {}), int(args["seed"]))
        return {"n_expected": len(expected), "none": declared is None}, [*expected, *(declared or [])]
    if op == "sets":
        sets = reference.input_sets(task, dict(sizes or {}), args["seeds"], args["param_seeds"])
        return {"per_set": len(sets[0]) if sets else 0}, [t for s in sets for t in s]
    if op == "inputs":
        return {}, build_inputs(task, sizes, int(args["seed"]), str(args["distribution"]))
    if op == "params":
        return {}, reference.param_tensors(task, sizes, int(args["seed"]))
    if op == "reference":
        n = int(args["n_inputs"])
        params = tensors[n:] if args.get("with_params") else None
        return {}, reference.reference_outputs(task, tensors[:n], sizes, seed=int(args["seed"]),
                                               params=params)
    if op == "device":
        n = int(args["n_inputs"])
        params = tensors[n:] if args.get("with_params") else None
        return {}, reference.device_outputs(task, tensors[:n], dict(sizes or {}), int(args["seed"]), params,
                                            str(args["device"]))
    if op == "signature":
        return {"params": reference.init_parameters(task)}, []
    if op == "declared":
        out = reference.declared_precision_outputs(task, tensors, sizes, seed=int(args["seed"]))
        return {"none": out is None}, out or []
    if op == "init":
        sent: list[Any] = []
        values = [_jsonable(v, sent) for v in reference.init_arguments(task, sizes)]
        return {"values": values}, sent
    if op == "ints":
        from sagekernel.tasks.modules import module_ints, task_module

        return {"ints": module_ints(task_module(task))}, []
    if op == "work":
        return {"work": list(reference.reference_work(task, dict(sizes or task.sizes)))}, []
    if op == "case_check":
        from sagekernel.tasks.npukb_rule import case_check

        n, m = int(args["n_inputs"]), int(args["n_outputs"])
        check = case_check(task, tensors[:n], tensors[n:n + m], tensors[n + m:], dict(sizes or {}),
                           int(args["seed"]))
        fields = [check.passed, check.rule, check.max_abs_error, check.max_rel_error, check.error]
        return {"check": fields}, []
    raise TaskError(f"unknown request {op!r}")


def main() -> None:
    import resource

    stdin = sys.stdin.buffer
    setup = json.loads(stdin.readline())
    _bind_to_parent(setup.get("parent"))
    mem = int(setup["mem"])
    if mem > 0:
        resource.setrlimit(resource.RLIMIT_DATA, (mem, mem))
    result = os.fdopen(int(setup["fd"]), "wb")
    import torch

    from sagekernel.tasks.record import task_from_json

    tasks: dict[str, Any] = {}
    result.write(encode({"ready": True}))
    result.flush()
    while True:
        prefix = _read_exact(stdin, 16)
        if prefix is None:
            return
        head, body = sizes_of(prefix)
        header_bytes, payload = _read_exact(stdin, head), _read_exact(stdin, body)
        if header_bytes is None or payload is None:
            return
        request = json.loads(header_bytes)
        if "task_json" in request:  # each task record crosses once
            tasks[request["task_id"]] = task_from_json(request["task_json"])
        torch.set_num_threads(int(request.get("threads", 1)))
        try:
            answer, out = handle(request["op"], tasks[request["task_id"]], request.get("args", {}),
                                 decode_tensors(request.get("tensors", []), payload))
            frame = encode({"ok": True, **answer}, out)
        except MemoryError:
            frame = encode({"ok": False, "kind": "memory", "error": "ran out of the task child's memory "
                            f"limit ({mem / 2**30:.1f} GiB)"})
        except (Exception, SystemExit) as exc:  # the task's own bug: reported, the child carries on
            # past the memory limit is a memory problem however the task wrapped it (as the
            # loading child counts it); any other TaskError is the file's own refusal
            kind = ("memory" if any(m in str(exc) for m in MEMORY_MESSAGES)
                    else "task" if isinstance(exc, TaskError) else "error")
            text = str(exc) if isinstance(exc, TaskError) else f"{type(exc).__name__}: {exc}"
            frame = encode({"ok": False, "kind": kind, "error": text})
        _kill_descendants()
        result.write(frame)
        result.flush()


if __name__ == "__main__":
    main()
