"""Typed frames between the harness and the sandboxed task child (tasks/task_child.py): a JSON header
and raw tensor bytes, never pickle. The child is task code, so everything it sends is untrusted:
`decode_tensors` accepts only the dtypes in `WIRE_DTYPES`, shapes of non-negative ints whose bytes
add up exactly, inside a frame no larger than `MAX_FRAME_BYTES`.

A frame is ``<Q header length><Q payload length>``, the header (UTF-8 JSON), then the payload: the
tensors' bytes back to back, each described in the header's ``"tensors"`` list by dtype and shape.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import Any

import torch

from sagekernel.errors import TaskError

PREFIX = struct.Struct("<QQ")
#: The largest header a child may send (its JSON: shapes, messages, module ints).
MAX_HEADER_BYTES = 16 << 20
#: The largest payload either side sends: a trial's inputs, parameters and outputs.
MAX_FRAME_BYTES = 32 << 30
#: The element types that cross the boundary, by name (every dtype a task may declare).
WIRE_DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
    "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool, "complex64": torch.complex64,
    "complex128": torch.complex128,
}


def raw_bytes(t: torch.Tensor) -> bytes:
    """A tensor's elements as bytes, in row-major order (what crosses every process boundary)."""
    flat = t.detach().cpu().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def nbytes(t: torch.Tensor) -> int:
    """len(raw_bytes(t)), without copying the tensor."""
    return t.numel() * t.element_size()


def encode(header: dict[str, Any], tensors: Sequence[torch.Tensor] = ()) -> bytes:
    """One frame: `header` plus the tensors' descriptions, then their bytes."""
    names = {v: k for k, v in WIRE_DTYPES.items()}
    specs, chunks = [], []
    for t in tensors:
        if t.dtype not in names:
            raise TaskError(f"a tensor of dtype {t.dtype} cannot cross the sandbox boundary")
        specs.append({"dtype": names[t.dtype], "shape": [int(n) for n in t.shape]})
        chunks.append(raw_bytes(t))
    text = json.dumps({**header, "tensors": specs}).encode("utf-8")
    payload = b"".join(chunks)
    return PREFIX.pack(len(text), len(payload)) + text + payload


def sizes_of(prefix: bytes) -> tuple[int, int]:
    """(header length, payload length) of a frame, refused when over the limits."""
    head, body = PREFIX.unpack(prefix)
    if head > MAX_HEADER_BYTES or body > MAX_FRAME_BYTES:
        raise TaskError(f"the task child sent a frame of {head + body} bytes, over the limit")
    return head, body


def decode(header_bytes: bytes, payload: bytes) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """The header and the tensors of a frame; a malformed one is a `TaskError`."""
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TaskError(f"the task child sent a malformed header: {exc}") from None
    if not isinstance(header, dict):
        raise TaskError("the task child sent a header that is not an object")
    return header, decode_tensors(header.get("tensors", []), payload)


def decode_tensors(specs: Any, payload: bytes) -> list[torch.Tensor]:
    if not isinstance(specs, list):
        raise TaskError("the task child's tensor list is not a list")
    out, offset = [], 0
    for spec in specs:
        dtype = WIRE_DTYPES.get(str(spec.get("dtype"))) if isinstance(spec, dict) else None
        shape = spec.get("shape") if isinstance(spec, dict) else None
        if dtype is None or not isinstance(shape, list) or not all(
                type(n) is int and n >= 0 for n in shape):
            raise TaskError(f"the task child sent a malformed tensor description: {spec!r:.200}")
        count = 1
        for n in shape:
            count *= n
        nbytes = count * torch.empty((), dtype=dtype).element_size()
        if offset + nbytes > len(payload):
            raise TaskError("the task child's tensors are larger than the bytes it sent")
        chunk = payload[offset:offset + nbytes]
        offset += nbytes
        out.append(torch.frombuffer(bytearray(chunk), dtype=dtype).reshape(shape) if nbytes
                   else torch.empty(shape, dtype=dtype))
    if offset != len(payload):
        raise TaskError("the task child sent bytes that no tensor describes")
    return out


__all__ = ["MAX_FRAME_BYTES", "PREFIX", "WIRE_DTYPES", "decode", "decode_tensors", "encode", "nbytes",
           "raw_bytes", "sizes_of"]
