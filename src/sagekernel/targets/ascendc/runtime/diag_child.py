"""One diagnostic call of a built Ascend C operator on the harness's probe (no timing, no wire).

Reads `<probe>/probe.json` (tensors in ABI order with their raw files; scalars), runs the operator
once -- `npu`: the torch extension's `run(...)` on torch_npu tensors; `twin`: the CPU twin
library's `sage_twin_run` -- and writes each output's bytes to `<probe>/out<k>.bin`. Whatever the
kernel prints (AscendC::printf, DumpTensor) and CANN's log (ASCEND_SLOG_PRINT_TO_STDOUT=1) go to
this process's stdout / stderr, which the caller keeps. Stdlib, torch and (npu) torch_npu only.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=("npu", "twin"), required=True)
    p.add_argument("--artifact", required=True)
    p.add_argument("--probe", required=True)
    a = p.parse_args(argv)
    import torch

    probe = Path(a.probe)
    spec = json.loads((probe / "probe.json").read_text())
    device = "cpu"
    if a.mode == "npu":
        import torch_npu  # noqa: F401

        device = "npu:0"
        torch.npu.set_device(device)  # type: ignore[attr-defined]
    tensors = []
    for k, t in enumerate(spec["tensors"]):
        raw = bytearray((probe / f"t{k}.bin").read_bytes())
        dtype = getattr(torch, "uint8" if t["dtype"] == "bool" else t["dtype"])
        host = (
            torch.frombuffer(raw, dtype=dtype).reshape(t["shape"])
            if raw
            else torch.empty(t["shape"], dtype=dtype)
        )
        tensors.append(host.clone().to(device))
    outputs = [t for t, meta in zip(tensors, spec["tensors"], strict=True) if meta["role"] == "output"]
    if a.mode == "npu":
        loader = importlib.util.spec_from_file_location(Path(a.artifact).name.split(".")[0], a.artifact)
        assert loader is not None and loader.loader is not None
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
        module.run(*tensors, *spec["attrs"])
        torch.npu.synchronize()  # type: ignore[attr-defined]
    else:
        lib = ctypes.CDLL(a.artifact)
        n = len(tensors)
        ptrs = (ctypes.c_void_p * n)(*[t.data_ptr() for t in tensors])
        nbytes = (ctypes.c_uint64 * n)(*[t.numel() * t.element_size() for t in tensors])
        sizes = (ctypes.c_int64 * max(1, len(spec["sizes"])))(*spec["sizes"])
        attrs = (ctypes.c_double * max(1, len(spec["attrs"])))(*[float(x) for x in spec["attrs"]])
        rc = lib.sage_twin_run(ptrs, nbytes, sizes, attrs)
        if rc != 0:
            print(f"sage_twin_run returned {rc}", file=sys.stderr)
            return 2
    sys.stdout.flush()
    for k, t in enumerate(outputs):
        (probe / f"out{k}.bin").write_bytes(t.cpu().contiguous().view(torch.uint8).numpy().tobytes())
    print("=== sage-diagnose: outputs written ===", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
