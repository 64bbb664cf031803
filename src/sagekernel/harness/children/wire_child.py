"""The runtime's side of the wire (docs/target_seam.md), stdlib only.

A Python runtime (Triton, CUDA, the reference timer) imports this file from its bound directory;
it must not import sagekernel. The request arrives on stdin, control bytes follow it, and every
reply goes out as a frame on the result fd (env SAGE_RESULT_FD) carrying the request's nonce.
"""

from __future__ import annotations

import json
import os
import secrets
import struct
from typing import Any, BinaryIO

MAGIC = b"SAGEREQ2"
GO, QUIT = b"G", b"Q"


def read_exact(stream: BinaryIO, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = stream.read(n - len(buf))
        if not chunk:
            raise EOFError(f"request truncated: wanted {n} bytes, got {len(buf)}")
        buf.extend(chunk)
    return bytes(buf)


def read_request(stream: BinaryIO) -> tuple[dict[str, Any], memoryview]:
    """(header, blob): `MAGIC`, u64 header length, JSON header, u64 blob length, blob."""
    if read_exact(stream, 8) != MAGIC:
        raise ValueError("not a SAGE request")
    (hlen,) = struct.unpack("<Q", read_exact(stream, 8))
    header = json.loads(read_exact(stream, hlen))
    (blen,) = struct.unpack("<Q", read_exact(stream, 8))
    blob = bytearray(blen)
    view = memoryview(blob)
    pos = 0
    while pos < blen:  # readinto: no second copy of a large blob
        n = stream.readinto(view[pos:])  # type: ignore[attr-defined]
        if not n:
            raise EOFError(f"blob truncated: wanted {blen} bytes, got {pos}")
        pos += n
    return header, view


def wait_control(stream: BinaryIO) -> bytes:
    """The next control byte: GO (run the next round) or QUIT (also on end of input)."""
    byte = stream.read(1)
    return byte if byte in (GO, QUIT) else QUIT


def returned_calls(n_calls: int, spec: Any) -> list[int]:
    """Positions of the calls whose outputs a round returns, drawn after the round ran."""
    if spec == "all" or int(spec) >= n_calls:
        return list(range(n_calls))
    return sorted(secrets.SystemRandom().sample(range(n_calls), int(spec)))


class Channel:
    """Frames: u64 length, a JSON line carrying the nonce, then an optional payload."""

    def __init__(self, fd: int, nonce: str) -> None:
        self.fd = fd
        self.nonce = nonce

    @classmethod
    def from_env(cls, nonce: str) -> Channel:
        return cls(int(os.environ["SAGE_RESULT_FD"]), nonce)

    def send(self, record: dict[str, Any], payload: bytes | memoryview = b"") -> None:
        head = json.dumps({**record, "nonce": self.nonce}).encode() + b"\n"
        self._write(struct.pack("<Q", len(head) + len(payload)) + head)
        if len(payload):
            self._write(payload)

    def _write(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
