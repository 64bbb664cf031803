"""The CUDA runtime: runs inside the sandbox on an NVIDIA GPU, speaks the wire (docs/target_seam.md).

    python -I -S runtime.py --device cuda [--site DIR ...]

It runs from the staged runtime folder (device_host.stage_runtime): beside it only the shared loop
and the harness's stdlib `wire_child.py` and `guard.py`.

The artifact is `{"lib": [offset, length], "symbol": "sage_launch"}`: the shared library's bytes
in the blob. It is written to a private temporary file and loaded with ctypes (RTLD_LOCAL, so
nothing in it interposes on this process's symbols), after torch has created the CUDA context.
Every call passes the `data_ptr()`s of fresh guarded device tensors for inputs and
sentinel-filled outputs, the sizes and attrs in the header's `args` order, and torch's current
stream; the launcher's return value (a cudaError_t) is reported as `done.status`.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile
from typing import Any

C_TYPES = {
    "in": ctypes.c_void_p,
    "out": ctypes.c_void_p,
    "i64": ctypes.c_int64,
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
}


def load_candidate(header: dict[str, Any], blob: memoryview, ops: Any) -> Any:
    import torch
    from loop import Side

    if ops.name != "cuda":
        raise RuntimeError(f"the CUDA runtime runs on the cuda device only, not {ops.name}")
    art = header["artifact"]
    off, length = art.get("blob") or art["lib"]  # the harness ships the library as the artifact
    symbol = art.get("symbol", "sage_launch")
    fd, path = tempfile.mkstemp(prefix="sage-cuda-", suffix=".so")
    with os.fdopen(fd, "wb") as fh:
        fh.write(bytes(blob[off : off + length]))
    lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    fn = getattr(lib, symbol)
    fn.restype = ctypes.c_int
    fn.argtypes = [C_TYPES[a["kind"]] for a in header["args"]] + [ctypes.c_void_p]
    current_stream = torch.cuda.current_stream  # captured before any candidate code could replace it

    def call(args: list[Any]) -> int:
        converted = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]
        return int(fn(*converted, current_stream().cuda_stream))

    return Side(
        "candidate",
        call,
        fills_outputs=True,
        takes_scalars=True,
        notes=[f"library {length} bytes, symbol {symbol}"],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda", choices=("cuda",))
    parser.add_argument("--site", action="append", default=[])
    opts = parser.parse_args(argv)
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    sys.path.extend(p for p in opts.site if p not in sys.path)
    import loop

    # torch loads cuBLAS/cuDNN on the reference's first call: lock once the first round is done.
    return loop.serve("cuda-native", opts.device, load_candidate, lock_at="first_round")


if __name__ == "__main__":
    sys.exit(main())
