"""The Triton runtime: runs inside the sandbox, speaks the wire (docs/target_seam.md).

    python -I -S runtime.py --device interpreter|cuda|npu --wire DIR --loop DIR [--site DIR ...]

`--wire` holds the harness's `wire_child.py`, `--loop` the shared device loop (targets/devloop),
`--site` the site-packages directories (the interpreter runs with -S). It imports no sagekernel.

The artifact in the request header is `{"module": [offset, length], "file": "kernel.py",
"init": [...], "seed": int, "bf16": "upcast" | "refuse"}`: the candidate's source in the blob, the
constructor arguments of `ModelNew` (the task's `get_init_inputs()` at this request's sizes),
the seed set before construction, and what the interpreter does with bfloat16 tensors.

The interpreter's known gaps (targets.md §2.1) are handled here:
- `TRITON_INTERPRET=1` is set before triton is imported; tensors stay on the CPU;
- bf16: the interpreter runs numpy on bf16 bit patterns (wrong results). "upcast" (default)
  places bf16 inputs as float32 tensors and casts float32 outputs that should be bf16 back;
  "refuse" answers `load_error` instead;
- `@triton.autotune` with several configs benchmarks through a GPU driver and fails: every
  Autotuner keeps its first config only (noted in `loaded.notes`);
- an out-of-bounds access is not detected by the interpreter and can corrupt the heap: the
  guard bytes around every input catch writes just past a buffer, and a child that dies is the
  harness's to report (this process computes no verdict).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from typing import Any

MODULE_NAME = "sage_candidate"


def _force_single_config(notes: list[str]) -> None:
    from triton.runtime import autotuner

    original = autotuner.Autotuner.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if len(self.configs) > 1:
            notes.append(
                f"autotune on the interpreter: kept the first of {len(self.configs)} configs "
                f"({self.configs[0]})"
            )
            self.configs = self.configs[:1]

    autotuner.Autotuner.__init__ = init


def load_candidate(header: dict[str, Any], blob: memoryview, ops: Any) -> Any:
    import torch
    from loop import Side

    art = header["artifact"]
    off, length = art.get("blob") or art["module"]  # the harness ships the module as the artifact
    source = bytes(blob[off : off + length])
    notes: list[str] = []
    interpreter = ops.name == "interpreter"
    uses_bf16 = any(a.get("dtype") == "bfloat16" for a in header["args"] if a["kind"] in ("in", "out"))
    if interpreter and uses_bf16:
        if art.get("bf16", "upcast") == "refuse":
            raise RuntimeError(
                "bfloat16 tensors are not supported on the Triton interpreter (it computes "
                "on bf16 bit patterns, triton-lang/triton#5424); run on cuda or npu"
            )
        notes.append("bf16 on the interpreter: inputs placed as float32, float32 outputs cast to bf16")
    if interpreter:
        _force_single_config(notes)
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

    def call(args: list[Any]) -> Any:
        with torch.no_grad():
            return model(*args)

    return Side("candidate", call, fills_outputs=False, upcast_bf16=interpreter and uses_bf16, notes=notes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", required=True, choices=("interpreter", "cuda", "npu"))
    parser.add_argument("--wire", required=True)
    parser.add_argument("--loop", required=True)
    parser.add_argument("--site", action="append", default=[])
    opts = parser.parse_args(argv)
    if opts.device == "interpreter":
        os.environ["TRITON_INTERPRET"] = "1"
    sys.path[:0] = [opts.wire, opts.loop]
    sys.path.extend(p for p in opts.site if p not in sys.path)
    import loop

    return loop.serve(f"triton-{opts.device}", opts.device, load_candidate)


if __name__ == "__main__":
    sys.exit(main())
