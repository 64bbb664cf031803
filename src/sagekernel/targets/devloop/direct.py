"""Running a device runtime directly, without the harness: a wire request built by hand (struct +
json, per docs/target_seam.md), the runtime as a plain subprocess, and its frames read back.

Used by the targets' tests and by `sagekernel.targets.devloop.selfcheck` (scripts/gpu_check.sh).
It is not a sandbox and judges nothing; the harness's own encoder (`sagekernel.harness.wire`)
and sandbox are what evaluations use.
"""

from __future__ import annotations

import json
import os
import secrets
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from sagekernel.targets.devloop.host import LOOP_DIR, WIRE_DIR
from sagekernel.tasks.inputs import build_inputs, expected_shape, full_sizes, init_arguments
from sagekernel.tasks.task import Task


@dataclass
class Request:
    data: bytes
    nonce: str
    inputs: list[list[torch.Tensor]]  # per set
    round_messages: list[bytes] = field(default_factory=list)  # per round: b"G", u64 length, inputs


def init_values(task: Task, sizes: dict[str, int]) -> list[Any]:
    return init_arguments(task, sizes)


def build_request(
    task: Task,
    artifact: bytes,
    meta: dict[str, Any],
    *,
    sizes: dict[str, int] | None = None,
    seeds: tuple[int, ...] = (1, 2),
    rounds: list[dict[str, Any]] | None = None,
    launcher_abi: bool = False,
    reference: bool = False,
    key: str = "module",
    nonce: str | None = None,
    warmup: int = 0,
) -> Request:
    full = full_sizes(task, sizes)
    nonce = nonce or secrets.token_hex(16)
    blob = bytearray(artifact)
    args: list[dict[str, Any]] = []
    for spec in task.inputs:
        shape = list(expected_shape(spec, full))
        args.append({"kind": "in", "dtype": spec.dtype, "shape": shape})
    for spec in task.outputs:
        shape = list(expected_shape(spec, full))
        itemsize = torch.empty(0, dtype=getattr(torch, spec.dtype)).element_size()
        n = 1
        for d in shape:
            n *= d
        args.append(
            {
                "kind": "out",
                "dtype": spec.dtype,
                "shape": shape,
                "nbytes": n * itemsize,
                "fill": "ff" if spec.dtype != "bool" else "02",
            }
        )
    if launcher_abi:
        args += [{"kind": "i64", "value": full[s]} for s in task.sizes]
        args += [{"kind": "f32" if isinstance(v, float) else "i64", "value": v} for v in task.attrs.values()]
    raws, inputs = [], []
    for seed in seeds:
        tensors = build_inputs(task, full, seed=seed)
        raws.append([t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
                     for t in tensors])
        for a, t in zip(args, tensors, strict=False):
            a["nbytes"] = t.numel() * t.element_size()
        inputs.append(tensors)
    # Rounds name sets by index here; on the wire each round's inputs are streamed with its control
    # byte (docs/target_seam.md), and "sets" is echoed in the frames for these tools only.
    wanted = rounds or [{"calls": list(range(len(seeds))), "return": "all"}]
    wire_rounds, messages = [], []
    for rnd in wanted:
        round_blob, spans = bytearray(), []
        for index in rnd["calls"]:
            call_spans = []
            for raw in raws[int(index)]:
                call_spans.append([len(round_blob), len(raw)])
                round_blob += raw
            spans.append(call_spans)
        wire_rounds.append({**rnd, "calls": spans, "sets": [int(i) for i in rnd["calls"]]})
        messages.append(b"G" + struct.pack("<Q", len(round_blob)) + bytes(round_blob))
    header: dict[str, Any] = {
        "nonce": nonce,
        "artifact": {key: [0, len(artifact)], **meta, "init": init_values(task, full)},
        "args": args,
        "rounds": wire_rounds,
        "threads": 1,
        "warmup": warmup,
    }
    if reference:
        header["reference"] = {
            "task_file": task.source_path.name,
            "task_source": task.source,
            "sizes": full,
            "init": init_values(task, full),
            "seed": 0,
        }
    head = json.dumps(header).encode()
    data = b"SAGEREQ2" + struct.pack("<Q", len(head)) + head + struct.pack("<Q", len(blob)) + bytes(blob)
    return Request(data, nonce, inputs, messages)


def run_runtime(
    runtime: Path,
    device: str,
    request: Request,
    *,
    controls: bytes | None = None,
    timeout_s: float = 300.0,
    env: dict[str, str] | None = None,
) -> tuple[list[tuple[dict[str, Any], bytes]], int, str]:
    """(frames, exit status, stderr tail) of one runtime process fed `request` and `controls`."""
    controls = b"".join(request.round_messages) + b"Q" if controls is None else controls
    read_fd, write_fd = os.pipe()
    argv = [
        sys.executable,
        "-I",
        str(runtime),
        "--device",
        device,
        "--wire",
        str(WIRE_DIR),
        "--loop",
        str(LOOP_DIR),
    ]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        **(env or {}),
        "SAGE_RESULT_FD": str(write_fd),
    }
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        pass_fds=(write_fd,),
        env=env,
        process_group=0,
    )
    os.close(write_fd)
    sink = bytearray()

    def drain() -> None:
        while chunk := os.read(read_fd, 1 << 20):
            sink.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        _, err = proc.communicate(request.data + controls, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    reader.join(timeout=10)
    os.close(read_fd)
    return parse_frames(bytes(sink), request.nonce), proc.returncode, err.decode("utf-8", "replace")[-3000:]


def parse_frames(data: bytes, nonce: str) -> list[tuple[dict[str, Any], bytes]]:
    frames, pos = [], 0
    while pos + 8 <= len(data):
        (n,) = struct.unpack("<Q", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + n]
        pos += 8 + n
        nl = body.index(b"\n")
        record = json.loads(body[:nl])
        if record.get("nonce") != nonce:
            break
        frames.append((record, body[nl + 1 :]))
    return frames


def outputs_of(
    frames: list[tuple[dict[str, Any], bytes]], task: Task, sizes: dict[str, int] | None = None
) -> dict[int, list[torch.Tensor]]:
    """call -> output tensors decoded from an `outputs` frame's payload (declared dtypes and shapes)."""
    full = full_sizes(task, sizes)
    decoded = {}
    for record, payload in frames:
        if record["kind"] != "outputs":
            continue
        tensors, pos = [], 0
        for spec in task.outputs:
            shape = expected_shape(spec, full)
            dtype = getattr(torch, spec.dtype)
            n = 1
            for d in shape:
                n *= d
            nbytes = n * torch.empty(0, dtype=dtype).element_size()
            chunk = bytearray(payload[pos : pos + nbytes])
            pos += nbytes
            t = torch.frombuffer(chunk, dtype=torch.uint8) if nbytes else torch.empty(0, dtype=torch.uint8)
            tensors.append(t.view(dtype).reshape(shape))
        decoded[record["call"]] = tensors
    return decoded
