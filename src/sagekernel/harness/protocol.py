"""Parent side of the child protocol: the request on stdin and the framed replies on the result fd.

Request: 8-byte little-endian header length, a JSON header (nonce, library path, calls), then one
blob holding every input byte. Reply frames: 8-byte length, a JSON line carrying the nonce, then
an optional payload (children/guard.py `Channel`). A frame without the right nonce, or a stream
that does not parse, ends the parse: the parent judges only what it can authenticate.
"""

from __future__ import annotations

import json
import secrets
import struct
from dataclasses import dataclass, field
from typing import Any


def new_nonce() -> str:
    return secrets.token_hex(16)


def encode_request(header: dict[str, Any], blob: bytes | bytearray) -> bytes:
    head = json.dumps({**header, "blob_len": len(blob)}).encode()
    return struct.pack("<Q", len(head)) + head + bytes(blob)


@dataclass
class Frame:
    record: dict[str, Any]
    payload: bytes = b""


@dataclass
class ParsedChannel:
    frames: list[Frame] = field(default_factory=list)
    problem: str = ""  # why parsing stopped early ("" when the stream was well formed)

    def first(self, kind: str) -> Frame | None:
        return next((f for f in self.frames if f.record.get("kind") == kind), None)

    def all(self, kind: str) -> list[Frame]:
        return [f for f in self.frames if f.record.get("kind") == kind]


def parse_frames(data: bytes, nonce: str) -> ParsedChannel:
    out = ParsedChannel()
    pos = 0
    view = memoryview(data)
    while pos < len(data):
        if pos + 8 > len(data):
            out.problem = "truncated frame header"
            break
        (length,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        if pos + length > len(data):
            out.problem = "truncated frame"
            break
        body = view[pos : pos + length]
        pos += length
        newline = bytes(body[: min(len(body), 1 << 20)]).find(b"\n")
        if newline < 0:
            out.problem = "frame without a record line"
            break
        try:
            record = json.loads(bytes(body[:newline]))
        except ValueError:
            out.problem = "frame record is not JSON"
            break
        if not isinstance(record, dict) or record.get("nonce") != nonce:
            out.problem = "frame with a wrong nonce"
            break
        out.frames.append(Frame(record, bytes(body[newline + 1 :])))
    return out
