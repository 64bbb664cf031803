"""Inside the build sandbox: the ahead-of-time compile gate for a Triton candidate (no GPU needed).

    python -I -S aot_child.py --kernel K.py --task TASK.py --arch 90 [--site DIR ...]

It imports the candidate, builds `ModelNew(*get_init_inputs())` and runs `forward` once on the
task's example inputs (CPU tensors) with `JITFunction.run` replaced by a recorder: each launch is
bound with Triton's own binder, giving the exact signature, constexprs and alignment attributes,
and compiled with `triton.compile(..., target=GPUTarget("cuda", arch, 32))` instead of being
launched. Nothing runs on a device; the outputs of forward are garbage and are discarded.

What this cannot derive (reported under `uncompiled`): kernels that forward never launches at
the example sizes; autotune configs other than the first (one config is forced, as on the
interpreter); launches that depend on values computed by an earlier kernel (the lint forbids
reading device data on the host, so these do not occur in an accepted module).

Reply: one JSON object on the result fd (SAGE_RESULT_FD).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback
import types
from typing import Any

MAX_ERROR = 2500


def _trim(exc: BaseException) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    keep = [ln for ln in lines if "kernel.py" in ln or not ln.startswith("  File")]
    text = "".join(keep[-10:]).strip()
    marker = "triton.compiler.errors.CompilationError"
    if marker in text:  # the compiler's own message points at the kernel line; the chain above is noise
        text = text[text.rindex(marker) :]
    return text[-MAX_ERROR:]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--task", required=True)
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--site", action="append", default=[])
    opts = parser.parse_args()
    sys.path.extend(p for p in opts.site if p not in sys.path)
    os.environ.pop("TRITON_INTERPRET", None)
    out: dict[str, Any] = {"compiled": [], "errors": [], "uncompiled": [], "forward_error": None}
    fd = int(os.environ.get("SAGE_RESULT_FD", "1"))
    try:
        run(opts, out)
    except BaseException as exc:  # the gate reports; the parent decides
        out["forward_error"] = _trim(exc)
    os.write(fd, json.dumps(out).encode())
    return 0


def run(opts: argparse.Namespace, out: dict[str, Any]) -> None:
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime import autotuner
    from triton.runtime.jit import JITFunction, create_function_from_signature

    target = GPUTarget("cuda", opts.arch, 32)
    backend = make_backend(target)
    done: dict[str, dict[str, Any]] = {}
    launched: set[str] = set()

    def record(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        name = self.fn.__name__
        launched.add(name)
        binder = create_function_from_signature(self.signature, self.params, backend)
        bound, specialization, options = binder(*args, **kwargs)
        options, signature, constexprs, attrs = self._pack_args(
            backend, kwargs, bound, specialization, options
        )
        key = f"{name}:{signature}:{sorted((str(k), str(v)) for k, v in constexprs.items())}"
        if key in done:
            return None
        t0 = time.perf_counter()
        entry: dict[str, Any] = {
            "kernel": name,
            "signature": {k: str(v) for k, v in signature.items()},
            "constexprs": {str(k): repr(v) for k, v in constexprs.items()},
        }
        try:
            compiled = triton.compile(
                ASTSource(self, signature, constexprs, attrs), target=target, options=options.__dict__
            )
        except BaseException as exc:
            entry["error"] = _trim(exc)
            out["errors"].append(entry)
        else:
            meta = compiled.metadata
            entry.update(
                shared=int(getattr(meta, "shared", 0)),
                num_warps=int(getattr(meta, "num_warps", 0)),
                seconds=round(time.perf_counter() - t0, 3),
            )
            out["compiled"].append(entry)
        done[key] = entry
        return None

    JITFunction.run = record
    original_init = autotuner.Autotuner.__init__

    def single_config(self: Any, *a: Any, **k: Any) -> None:
        original_init(self, *a, **k)
        self.configs = self.configs[:1]

    autotuner.Autotuner.__init__ = single_config

    task = types.ModuleType("sage_task")
    task.__file__ = opts.task
    with open(opts.task, encoding="utf-8") as fh:
        exec(compile(fh.read(), opts.task, "exec"), task.__dict__)
    torch.manual_seed(0)
    inputs = list(task.get_inputs())
    init = list(task.get_init_inputs()) if hasattr(task, "get_init_inputs") else []

    spec = importlib.util.spec_from_file_location("sage_candidate", opts.kernel)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sage_candidate"] = module
    spec.loader.exec_module(module)
    defined = sorted(
        n
        for n, v in vars(module).items()
        if isinstance(v, JITFunction) or isinstance(getattr(v, "fn", None), JITFunction)
    )
    try:
        model = module.ModelNew(*init)
        with torch.no_grad():
            model(*inputs)
    except BaseException as exc:
        out["forward_error"] = _trim(exc)
    out["uncompiled"] = [n for n in defined if _kernel_name(getattr(module, n)) not in launched]


def _kernel_name(obj: Any) -> str:
    while hasattr(obj, "fn") and not hasattr(obj, "signature"):
        obj = obj.fn
    fn = getattr(obj, "fn", obj)
    return getattr(fn, "__name__", "")


if __name__ == "__main__":
    sys.exit(main())
