"""Runs inside the sandbox: one call of the candidate's ModelNew on the Triton interpreter.

    python -I -S diagnose_child.py --site DIR ...   (cwd: the probe folder)

Reads manifest.json and the probe's buffers (b<k>.bin), imports kernel.py, seeds and builds
ModelNew(*init), calls forward on the inputs and writes each output as o<k>.bin. The kernels'
`tl.device_print` / `print` output goes to stdout before the marker line; an exception prints its
traceback and exits 3. It imports no sagekernel and decides nothing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback

MARK = "=== sage-diagnose: kernel returned ==="


def main() -> int:
    args = sys.argv[1:]
    sys.path.extend(args[i + 1] for i, a in enumerate(args) if a == "--site")
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    import torch

    with open("manifest.json", encoding="utf-8") as fh:
        manifest = json.load(fh)
    tensors = []
    for k, t in enumerate(manifest["tensors"]):
        dtype = getattr(torch, t["dtype"])
        with open(f"b{k}.bin", "rb") as fh:
            raw = bytearray(fh.read())
        flat = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        tensors.append((t, flat.reshape(t["shape"]).clone()))
    inputs = [x for t, x in tensors if t["role"] == "input"]
    outputs = [(k, t) for k, (t, _) in enumerate(tensors) if t["role"] == "output"]
    try:
        spec = importlib.util.spec_from_file_location("sage_candidate", os.path.abspath("kernel.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["sage_candidate"] = module
        spec.loader.exec_module(module)
        torch.manual_seed(int(manifest["seed"]))
        model = module.ModelNew(*manifest["init"])
        with torch.no_grad():
            result = model(*inputs)
    except BaseException:
        sys.stdout.flush()
        traceback.print_exc()
        return 3
    sys.stdout.flush()
    print(MARK, file=sys.stderr, flush=True)
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(results) != len(outputs):
        print(
            f"forward returned {len(results)} tensor(s), the task has {len(outputs)} output(s)",
            file=sys.stderr,
        )
        return 4
    for (k, t), got in zip(outputs, results, strict=True):
        got = got.detach().to(getattr(torch, t["dtype"])).contiguous().reshape(-1)
        with open(f"o{k}.bin", "wb") as fh:
            fh.write(got.view(torch.uint8).numpy().tobytes() if got.numel() else b"")
    return 0


if __name__ == "__main__":
    sys.exit(main())
