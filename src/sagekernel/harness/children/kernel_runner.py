"""Inside the sandbox: load the candidate .so and run the calls the parent asked for.

Stdlib only (no torch, no numpy: start-up must stay ~tens of ms). The parent sends every input
byte and the output sizes; this process owns no reference, no seed and no verdict. For each call
it copies the inputs into guard-padded buffers, pre-fills outputs with the sentinel, calls
`sage_kernel`, and reports the outputs, whether inputs changed and whether guard bytes around
any buffer were overwritten. Calls naming the same `slot` reuse the same buffers (same
addresses, new contents), so a kernel that caches results by pointer returns stale data.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from guard import Channel, lock_files, lock_process, read_request

GUARD = 64
GUARD_BYTE = 0xA5
_libc = ctypes.CDLL(None)
_memcmp = _libc.memcmp
_memcmp.restype = ctypes.c_int
_memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]


class Buffer:
    """`nbytes` usable bytes, 64-byte aligned, with GUARD bytes of 0xA5 on both sides."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.mem = mmap.mmap(-1, GUARD * 2 + max(nbytes, 1))
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.mem))
        self.addr = self.base + GUARD
        self.mem[:GUARD] = bytes([GUARD_BYTE]) * GUARD
        self.mem[GUARD + nbytes : GUARD * 2 + nbytes] = bytes([GUARD_BYTE]) * GUARD

    def fill(self, pattern: bytes) -> None:
        reps = self.nbytes // len(pattern) + 1
        self.mem[GUARD : GUARD + self.nbytes] = (pattern * reps)[: self.nbytes]

    def load(self, data: memoryview) -> None:
        self.mem[GUARD : GUARD + self.nbytes] = data

    def guards_intact(self) -> bool:
        pad = bytes([GUARD_BYTE]) * GUARD
        return self.mem[:GUARD] == pad and self.mem[GUARD + self.nbytes : GUARD * 2 + self.nbytes] == pad

    def first_difference(self, data: memoryview, data_addr: int) -> int:
        """-1 if the contents equal `data` (at address `data_addr`), else the first differing byte."""
        if _memcmp(self.addr, data_addr, len(data)) == 0:
            return -1
        view = self.view()
        for i in range(len(data)):
            if view[i] != data[i]:
                return i
        return -1

    def view(self) -> memoryview:
        return memoryview(self.mem)[GUARD : GUARD + self.nbytes]


def main() -> int:
    header, blob = read_request(sys.stdin.buffer)
    sys.path.extend(header.get("site", []))  # run with -S: only the paths the parent names
    blob_addr = ctypes.addressof(ctypes.c_char.from_buffer(blob)) if len(blob) else 0
    chan = Channel(int(os.environ["SAGE_RESULT_FD"]), header["nonce"])
    seccomp = lock_process()
    chan.send({"kind": "hello", "seccomp": seccomp})
    try:
        lib = ctypes.CDLL(header["lib"], mode=os.RTLD_NOW | os.RTLD_LOCAL)
        fn = getattr(lib, header["symbol"])
    except (OSError, AttributeError) as exc:
        chan.send({"kind": "load_error", "error": str(exc)})
        return 0
    fn.restype = None
    lock_files()
    chan.send({"kind": "loaded"})
    slots: dict[str, tuple[list[Buffer], list[Buffer]]] = {}
    for call in header["calls"]:
        in_sizes = [n for _, n in call["inputs"]]
        out_sizes = list(call["outputs"])
        cached = slots.get(call["slot"])
        if (
            cached is None
            or [b.nbytes for b in cached[0]] != in_sizes
            or [b.nbytes for b in cached[1]] != out_sizes
        ):
            cached = ([Buffer(n) for n in in_sizes], [Buffer(n) for n in out_sizes])
            slots[call["slot"]] = cached
        ins, outs = cached
        for buf, (off, n) in zip(ins, call["inputs"], strict=False):
            buf.load(blob[off : off + n])
        for buf, fill in zip(outs, call["fills"], strict=False):
            buf.fill(bytes.fromhex(fill))
        args: list[object] = [ctypes.c_void_p(b.addr) for b in ins + outs]
        for kind, value in call["scalars"]:
            args.append(ctypes.c_int64(int(value)) if kind == "i64" else ctypes.c_float(float(value)))
        chan.send({"kind": "begin", "id": call["id"]})
        t0 = time.perf_counter()
        fn(*args)
        seconds = time.perf_counter() - t0
        changed = [
            buf.first_difference(blob[off : off + n], blob_addr + off)
            for buf, (off, n) in zip(ins, call["inputs"], strict=False)
        ]
        guards = [b.guards_intact() for b in ins + outs]
        payload = b"".join(bytes(b.view()) for b in outs)
        chan.send(
            {
                "kind": "done",
                "id": call["id"],
                "seconds": seconds,
                "inputs_changed": changed,
                "guards": guards,
            },
            payload,
        )
    chan.send({"kind": "end"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
