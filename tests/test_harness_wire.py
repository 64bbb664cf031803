"""The wire: frames are read in linear time and authenticated by the nonce; plans encode as the
driver and the Python runtimes read them."""

from __future__ import annotations

import json
import struct
import time

from sagekernel.harness.wire import ALL, Arg, FrameStream, Plan, Round, encode_binary, encode_json


def frame(nonce: str, record: dict[str, object], payload: bytes = b"") -> bytes:
    head = json.dumps({**record, "nonce": nonce}).encode() + b"\n"
    return struct.pack("<Q", len(head) + len(payload)) + head + payload


def test_large_payloads_parse_in_linear_time() -> None:
    """32 MiB of outputs fed in pipe-sized chunks: the old server re-parsed everything per read."""
    payload = bytes(range(256)) * (128 * 1024)  # 32 MiB
    data = frame("n", {"kind": "done", "call": 0}) + frame("n", {"kind": "outputs", "call": 0}, payload)
    data += frame("n", {"kind": "round_end", "round": 0})
    stream = FrameStream("n")
    t0 = time.perf_counter()
    for i in range(0, len(data), 65536):
        stream.feed(data[i : i + 65536])
    elapsed = time.perf_counter() - t0
    assert [f.kind for f in stream.frames] == ["done", "outputs", "round_end"]
    assert stream.frames[1].payload == payload
    assert elapsed < 3.0, elapsed


def test_a_forged_frame_stops_the_stream() -> None:
    stream = FrameStream("good")
    stream.feed(
        frame("good", {"kind": "hello"}) + frame("bad", {"kind": "done"}) + frame("good", {"kind": "end"})
    )
    assert [f.kind for f in stream.frames] == ["hello"]
    assert stream.problem == "a frame with a wrong nonce"


def test_frames_split_anywhere_reassemble() -> None:
    data = b"".join(frame("n", {"kind": "done", "call": i}, bytes([i]) * i) for i in range(20))
    stream = FrameStream("n")
    for b in data:
        stream.feed(bytes([b]))
    assert [f.record["call"] for f in stream.frames] == list(range(20))
    assert all(f.payload == bytes([i]) * i for i, f in enumerate(stream.frames))


def test_plans_encode_for_both_readers() -> None:
    plan = Plan(
        "0" * 32,
        [Arg("in", 8), Arg("out", 8, fill=b"\xa5" * 4), Arg("i64", value=7), Arg("f32", value=0.5)],
        [Round([[(0, 8)]], ALL), Round([[(8, 8)]], 1, noop=True)],
    )
    plan.artifact_blob = b"LIB"
    binary = encode_binary(plan, "sage_kernel")
    assert binary.startswith(b"SAGEBIN3" + b"0" * 32) and binary.endswith(b"LIB")
    header = encode_json(plan)
    (hlen,) = struct.unpack_from("<Q", header, 8)
    record = json.loads(header[16 : 16 + hlen])
    assert record["rounds"][1] == {"calls": [[[8, 8]]], "return": 1, "noop": True}
    assert [a["kind"] for a in record["args"]] == ["in", "out", "i64", "f32"]
