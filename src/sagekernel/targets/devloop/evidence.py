"""The runtime evidence an adversarial kernel must leave in a runtime's report (the harness rejects on
it; the runtime judges nothing). Shared by the adversarial tests and scripts/gpu_check.sh."""

from __future__ import annotations

from typing import Any

from sagekernel.harness.compare import compare
from sagekernel.targets.devloop.direct import Request, outputs_of
from sagekernel.tasks.inputs import reference_outputs
from sagekernel.tasks.task import Task

#: check name -> what it means, as the adversarial files name them after "EXPECT: ... runtime".
CHECKS = {
    "inputs_changed": "done.inputs_changed has an entry != -1 (the candidate wrote its input)",
    "guards": "done.guards has a False (a write past a buffer)",
    "storage": "two calls returned the same output storage (outputs.out_meta[].storage): a cache",
    "stale_outputs": "a call's outputs do not match the reference for its own set",
    "integrity": "loaded.integrity names a replaced torch function",
    "threads": "done.threads exceeds loaded.threads (work left running after the call)",
    "plain": "outputs.out_meta[].plain is False (a tensor subclass)",
    "alias": "outputs.out_meta[].alias names an input (the output is a view of it)",
}


def present(
    check: str, frames: list[tuple[dict[str, Any], bytes]], task: Task, req: Request, sizes: dict[str, int]
) -> bool:
    loaded = next((f for f, _ in frames if f["kind"] == "loaded"), {})
    done = [f for f, _ in frames if f["kind"] == "done"]
    outs = [f for f, _ in frames if f["kind"] == "outputs"]
    if check == "inputs_changed":
        return any(c != -1 for d in done for c in d["inputs_changed"])
    if check == "guards":
        return any(not ok for d in done for ok in d["guards"])
    if check == "storage":
        ptrs = [o["out_meta"][0].get("storage") for o in outs if o.get("out_meta")]
        return len(set(ptrs)) < len(ptrs)
    if check == "stale_outputs":
        decoded = outputs_of(frames, task, sizes)
        sets = {f["call"]: f["set"] for f in outs}
        return any(
            compare(
                t[0],
                reference_outputs(task, req.inputs[sets[c]], sizes)[0],
                task.atol,
                task.rtol,
                task.outputs[0].dtype,
            )
            is not None
            for c, t in decoded.items()
        )
    if check == "integrity":
        return any("replaced" in line for line in loaded.get("integrity", []))
    if check == "threads":
        return any(d.get("threads", 0) > loaded.get("threads", 1 << 30) for d in done)
    if check == "plain":
        return any(not o["out_meta"][0].get("plain", True) for o in outs if o.get("out_meta"))
    if check == "alias":
        return any(o["out_meta"][0].get("alias", -1) >= 0 for o in outs if o.get("out_meta"))
    raise ValueError(f"unknown runtime check {check!r} (known: {', '.join(CHECKS)})")
