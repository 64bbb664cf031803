"""Inside the sandbox: time the task's PyTorch reference, round by round, in its own process.

The candidate never shares this address space (the CPU target's candidate runs in the native
driver), so nothing it does can patch this timer, change torch's allocator or signal handlers, or
slow the reference. The harness interleaves this process's rounds with the candidate's and checks
the reference's times against rounds timed before the candidate was even loaded. Stdlib, torch and
sagekernel.tasks only; speaks the wire of docs/target_seam.md.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from guard import lock_process  # noqa: E402
from wire_child import GO, Channel, read_request, wait_control  # noqa: E402


def main() -> int:
    header, blob = read_request(sys.stdin.buffer)
    sys.path.extend(p for p in header["reference"].get("site", []) if p not in sys.path)
    chan = Channel.from_env(header["nonce"])
    import torch

    from sagekernel.tasks.inputs import make_model
    from sagekernel.tasks.task import Task, TensorSpec

    ref = header["reference"]
    work = Path(tempfile.gettempdir()) / f"sage-ref-{header['nonce']}"
    work.mkdir()
    for name, text in ref.get("companions", {}).items():  # files the task reads next to itself
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text, encoding="utf-8")
    task_file = work / ref["task_file"]
    task_file.write_text(ref["task_source"], encoding="utf-8")
    t = ref["task"]
    task = Task(
        name=t["name"], level=t["level"], category=t["category"], description="", source_path=task_file,
        inputs=[TensorSpec(n, tuple(d), dt) for n, d, dt in t["inputs"]],
        outputs=[TensorSpec(n, tuple(d), dt) for n, d, dt in t["outputs"]],
        attrs=t["attrs"], sizes=t["sizes"], variants=[], dtype=t["dtype"], atol=t["atol"], rtol=t["rtol"],
    )
    torch.set_num_threads(int(header["threads"]))
    model = make_model(task, ref["sizes"])
    dtypes = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
              "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
              "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool}
    ins = [a for a in header["args"] if a["kind"] == "in"]
    seccomp = lock_process()
    chan.send({"kind": "hello", "runtime": "torch-reference", "seccomp": seccomp,
               "torch_threads": torch.get_num_threads()})
    chan.send({"kind": "loaded"})
    for r, rnd in enumerate(header["rounds"]):
        if wait_control(sys.stdin.buffer) != GO:
            break
        (n,) = __import__("struct").unpack("<Q", sys.stdin.buffer.read(8))
        data = bytearray(n)
        view = memoryview(data)
        pos = 0
        while pos < n:
            got = sys.stdin.buffer.readinto(view[pos:])  # type: ignore[attr-defined]
            if not got:
                return 1
            pos += got
        sets = []
        for spans in rnd["calls"]:
            tensors = []
            for arg, (off, length) in zip(ins, spans, strict=True):
                raw = torch.frombuffer(data, dtype=torch.uint8, count=length, offset=off) if length else \
                    torch.empty(0, dtype=torch.uint8)
                tensors.append(raw.clone().view(dtypes[arg["dtype"]]).reshape(arg["shape"]))
            sets.append(tensors)
        with torch.no_grad():
            for i, tensors in enumerate(sets):
                t0 = time.perf_counter_ns()
                model(*tensors)
                ns = time.perf_counter_ns() - t0
                chan.send({"kind": "done", "call": i, "ns": ns, "inputs_changed": [-1] * len(ins),
                           "guards": [], "fpenv": "ok"})
        chan.send({"kind": "round_end", "round": r})
    chan.send({"kind": "end"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
