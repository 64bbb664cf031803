"""Run by test_interpreter_model.py in a fresh interpreter (TRITON_INTERPRET=1): what the Triton
runtime's interpreter model does to kernels of a module named `sage_candidate`. Prints one JSON."""

import json
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, sys.argv[1])  # targets/triton (interpreter_model.py, warm_kernel.py)

import interpreter_model
import torch

notes: list[str] = []
interpreter_model.prepare(notes, "sage_candidate")

import importlib.util  # noqa: E402

spec = importlib.util.spec_from_file_location("sage_candidate", sys.argv[2])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
interpreter_model.rewrite_kernels(module)
out: dict[str, object] = {}
a = torch.full((16, 16), 1.0 + 2.0**-12)  # 1 + 2^-12 rounds to 1.0 in TF32 (10 mantissa bits)
b = torch.ones(16, 16)
for precision in ("tf32", "ieee"):
    c = torch.empty(16, 16)
    getattr(module, f"dot_{precision}")[(1,)](a, b, c)
    out[precision] = float(c[0, 0])
try:
    module.uses_hasattr[(1,)](a)
    out["hasattr"] = "ran"
except Exception as exc:
    out["hasattr"] = f"{type(exc).__name__}: {exc}"
try:
    module.dot_fp8[(1,)](a, b, torch.empty(16, 16))
    out["fp8"] = "ran"
except Exception as exc:
    out["fp8"] = f"{type(exc).__name__}: {exc}"
out["notes"] = notes
print(json.dumps(out))
