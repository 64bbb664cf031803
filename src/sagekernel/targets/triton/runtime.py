"""The Triton runtime: runs inside the sandbox, speaks the wire (docs/target_seam.md).

    python -I -S runtime.py --device interpreter|cuda|npu [--site DIR ...]

It runs from the staged runtime folder (device_host.stage_runtime): beside it only `loop.py`,
`devices.py`, `hostguard.py`, `interpreter_model.py`, `warm_kernel.py` and the harness's `wire_child.py` and
`guard.py` -- no other sagekernel source, no reference code. `--site` names the site-packages
directories (the interpreter runs with -S).

The artifact in the request header is `{"module": [offset, length], "file": "kernel.py", "init":
[...], "seed": int, "bf16": "upcast" | "refuse"}`: the candidate's source in the blob, the
constructor arguments of `ModelNew` (the task's `get_init_inputs()` at this request's sizes), the
seed set before construction, and what the interpreter does with bfloat16 tensors.

Before the candidate is imported, on the interpreter, `interpreter_model.prepare` models TF32 and
restricts kernel builtins; the host guard (hostguard.py) wraps the launch entry points so that,
around `forward`, torch ops run only inside kernel launches. loop.serve locks the process
(guard.py) once it is loaded and every interpreted kernel rewritten; on a GPU the JIT compiles at
the first call (it runs ptxas and writes its cache), so there the lock waits for the end of the
first round.

The interpreter's known gaps (targets.md §2.1):
- `TRITON_INTERPRET=1` is set before triton is imported; tensors stay on the CPU;
- bf16: the interpreter runs numpy on bf16 bit patterns (wrong results) and models no bf16
  arithmetic, so its verdict would credit float32 precision: "refuse" (the default) answers
  `load_error`; "upcast" places bf16 inputs as float32 and casts float32 outputs back;
- out-of-bounds accesses are not detected by the interpreter: the guard bytes around every input
  catch writes just past a buffer, and a child that dies is the harness's to report.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from typing import Any

MODULE_NAME = "sage_candidate"


#: Set up by prepare(): the host guard and the interpreter's notes.
_STATE: dict[str, Any] = {}


def _bf16(header: dict[str, Any]) -> bool:
    return any(a.get("dtype") == "bfloat16" for a in header["args"] if a["kind"] in ("in", "out"))


def prepare(header: dict[str, Any], ops: Any) -> None:
    """The runtime's own setup, before the integrity snapshot: bf16 policy, the interpreter's
    models, the host guard around launch entry points (warmed, so its lazy imports are done)."""
    import hostguard
    from triton.runtime.jit import JITFunction

    art = header["artifact"]
    notes: list[str] = []
    interpreter = ops.name == "interpreter"
    if interpreter and _bf16(header):
        if art.get("bf16", "refuse") == "refuse":
            raise RuntimeError(
                "bfloat16 tensors are not judged on the Triton interpreter: it computes on bf16 bit "
                "patterns (triton-lang/triton#5424) and models no bf16 arithmetic, so its verdict "
                "would credit float32 precision; run on cuda or npu"
            )
        notes.append("bf16 on the interpreter: inputs placed as float32, float32 outputs cast to bf16")
    host_guard = hostguard.HostGuard()
    hostguard.warm(host_guard)
    hostguard.wrap_launch(JITFunction, "run", host_guard)
    if interpreter:
        import interpreter_model
        from triton.runtime.interpreter import InterpretedFunction

        interpreter_model.prepare(notes, MODULE_NAME)
        hostguard.wrap_launch(InterpretedFunction, "run", host_guard)
    _STATE.update(notes=notes, host_guard=host_guard)


def load_candidate(header: dict[str, Any], blob: memoryview, ops: Any) -> Any:
    import torch
    from loop import Side

    art = header["artifact"]
    off, length = art.get("blob") or art["module"]  # the harness ships the module as the artifact
    source = bytes(blob[off : off + length])
    interpreter = ops.name == "interpreter"
    notes: list[str] = _STATE["notes"]
    # The JIT reads the kernel's source through inspect, so the module lives in a real file.
    folder = tempfile.mkdtemp(prefix="sage-triton-")
    path = os.path.join(folder, art.get("file", "kernel.py"))
    with open(path, "wb") as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    spec.loader.exec_module(module)
    cls = getattr(module, "ModelNew", None)
    if not isinstance(cls, type):
        raise RuntimeError("kernel.py defines no class ModelNew")
    torch.manual_seed(int(art.get("seed", 0)))
    model = cls(*art.get("init", []))
    if isinstance(model, torch.nn.Module):
        model = model.to(ops.torch_device).eval()
    if interpreter:
        import interpreter_model

        interpreter_model.rewrite_kernels(module)

    def call(args: list[Any]) -> Any:
        with torch.no_grad():
            return model(*args)

    return Side(
        "candidate",
        call,
        fills_outputs=False,
        upcast_bf16=interpreter and _bf16(header),
        notes=notes,
        host_guard=_STATE["host_guard"],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", required=True, choices=("interpreter", "cuda", "npu"))
    parser.add_argument("--site", action="append", default=[])
    opts = parser.parse_args(argv)
    if opts.device == "interpreter":
        os.environ["TRITON_INTERPRET"] = "1"
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    sys.path.extend(p for p in opts.site if p not in sys.path)
    import loop

    # On a GPU the JIT compiles at the first call (ptxas runs, the cache is written): lock after it.
    lock_at = "load" if opts.device == "interpreter" else "first_round"
    return loop.serve(f"triton-{opts.device}", opts.device, load_candidate, lock_at=lock_at, prepare=prepare)


if __name__ == "__main__":
    sys.exit(main())
