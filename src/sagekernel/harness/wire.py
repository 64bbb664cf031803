"""The harness's side of the wire to a runtime (docs/target_seam.md).

A `Plan` is what one runtime process is asked to do: the arguments in ABI order, and rounds of
calls whose input sets are streamed to it round by round (so no future input is ever in the
candidate's address space). `encode_json` serves Python runtimes, `encode_binary` the native
CPU driver; both carry the same content. `FrameStream` reads reply frames incrementally in
linear time, however large the outputs.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

JSON_MAGIC = b"SAGEREQ2"
BINARY_MAGIC = b"SAGEBIN3"
ARG_KINDS = {"in": 0, "out": 1, "i64": 2, "f32": 3, "f64": 4}
ALL = "all"


@dataclass
class Arg:
    kind: str  # in | out | i64 | f32 | f64
    nbytes: int = 0  # buffers
    value: float | int = 0  # scalars
    fill: bytes = b""  # outputs: the sentinel pattern written before every call
    dtype: str = ""
    shape: tuple[int, ...] = ()

    def record(self) -> dict[str, Any]:
        if self.kind in ("in", "out"):
            return {
                "kind": self.kind,
                "nbytes": self.nbytes,
                "dtype": self.dtype,
                "shape": list(self.shape),
                "fill": self.fill.hex(),
            }
        return {"kind": self.kind, "value": self.value}


@dataclass
class Round:
    #: per call, the (offset, length) of each input inside this round's blob
    calls: list[list[tuple[int, int]]]
    returned: int | str = ALL  # how many calls' outputs come back (drawn after the round), or ALL
    noop: bool = False  # the native driver runs its own empty kernel (overhead calibration)


@dataclass
class Plan:
    nonce: str
    args: list[Arg]
    rounds: list[Round]
    artifact: dict[str, Any] = field(default_factory=dict)  # JSON side: target-specific
    artifact_blob: bytes = b""  # bytes the artifact record points into (a library, a module)
    threads: int = 1
    extra: dict[str, Any] = field(default_factory=dict)  # JSON side: e.g. "reference"
    #: The native driver (harness/supervised.py): stop after every call, not after the round's last
    #: (the quarantine's layout), and this many pages before its buffers (another address layout).
    stop_every_call: bool = False
    layout_pad_pages: int = 0

    @property
    def inputs(self) -> list[Arg]:
        return [a for a in self.args if a.kind == "in"]

    @property
    def outputs(self) -> list[Arg]:
        return [a for a in self.args if a.kind == "out"]


def encode_json(plan: Plan) -> bytes:
    header = {
        "nonce": plan.nonce,
        "artifact": plan.artifact,
        "args": [a.record() for a in plan.args],
        "rounds": [
            {
                "calls": [[list(span) for span in call] for call in r.calls],
                "return": r.returned,
                "noop": r.noop,
            }
            for r in plan.rounds
        ],
        "threads": plan.threads,
        **plan.extra,
    }
    head = json.dumps(header).encode()
    return (
        JSON_MAGIC
        + struct.pack("<Q", len(head))
        + head
        + struct.pack("<Q", len(plan.artifact_blob))
        + (plan.artifact_blob)
    )


def encode_binary(plan: Plan, symbol: str) -> bytes:
    """The native driver's plan (targets/cpu/driver/sage_driver.c reads exactly this). Inputs and
    sentinels are not in it: the parent writes them into the driver's buffers (supervised.py)."""
    u64 = struct.Struct("<Q").pack
    out = bytearray(BINARY_MAGIC)
    out += plan.nonce.encode()[:32].ljust(32, b"0")
    out += u64(plan.threads) + u64(int(plan.stop_every_call)) + u64(plan.layout_pad_pages)
    out += u64(len(plan.artifact_blob))
    out += u64(len(symbol)) + symbol.encode()
    out += u64(len(plan.args))
    for a in plan.args:
        if a.kind in ("in", "out"):
            raw = a.nbytes
        elif a.kind == "i64":
            raw = int(a.value) & 0xFFFF_FFFF_FFFF_FFFF
        else:
            (raw,) = struct.unpack("<Q", struct.pack("<d", float(a.value)))
        out += u64(ARG_KINDS[a.kind]) + u64(raw)
    out += u64(len(plan.rounds))
    for r in plan.rounds:
        out += u64(len(r.calls)) + u64(int(r.noop))
    out += plan.artifact_blob
    return bytes(out)


def round_message(blob: bytes | bytearray | memoryview) -> bytes:
    """What starts one round: the control byte and the round's input sets."""
    return b"G" + struct.pack("<Q", len(blob)) + bytes(blob)


@dataclass
class Frame:
    record: dict[str, Any]
    payload: bytes = b""

    @property
    def kind(self) -> str:
        return str(self.record.get("kind", ""))


class FrameStream:
    """Incremental, linear-time frame parser. Feed bytes as they arrive; `frames` grows.

    Each byte is examined once: a partial frame waits until its declared length has arrived. A
    frame without the nonce, or one that does not parse, stops the stream (`problem` says why).
    """

    MAX_RECORD = 1 << 20

    def __init__(self, nonce: str) -> None:
        self.nonce = nonce
        self.frames: list[Frame] = []
        self.problem = ""
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes) -> None:
        if self.problem:
            return
        self._buf += data
        while not self.problem:
            avail = len(self._buf) - self._pos
            if avail < 8:
                break
            (length,) = struct.unpack_from("<Q", self._buf, self._pos)
            if avail < 8 + length:
                break
            start = self._pos + 8
            with memoryview(self._buf) as whole:
                body = whole[start : start + length]
                newline = bytes(body[: min(length, self.MAX_RECORD)]).find(b"\n")
                head = bytes(body[:newline]) if newline >= 0 else b""
                payload = bytes(body[newline + 1 :]) if newline >= 0 else b""
                body.release()
            if newline < 0:
                self.problem = "a frame without a record line"
                break
            try:
                record = json.loads(head)
            except ValueError:
                self.problem = "a frame record that is not JSON"
                break
            if not isinstance(record, dict) or record.get("nonce") != self.nonce:
                self.problem = "a frame with a wrong nonce"
                break
            self.frames.append(Frame(record, payload))
            self._pos = start + length
        if self._pos > (1 << 20) and self._pos * 2 > len(self._buf):
            del self._buf[: self._pos]  # amortised compaction keeps the total work linear
            self._pos = 0

    def first(self, kind: str) -> Frame | None:
        return next((f for f in self.frames if f.kind == kind), None)

    def all(self, kind: str) -> list[Frame]:
        return [f for f in self.frames if f.kind == kind]


__all__ = [
    "ALL",
    "Arg",
    "Frame",
    "FrameStream",
    "Plan",
    "Round",
    "encode_binary",
    "encode_json",
    "round_message",
]
