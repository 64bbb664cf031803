"""The wire loop of a device runtime (docs/target_seam.md): place inputs, call, time, report.

Imports torch, `devices`, `hostguard` and the harness's `wire_child` and `guard` (stdlib +
pyseccomp) only; it runs from the staged runtime folder (targets/device_host.py). A runtime supplies a
`load_candidate(header, blob, ops) -> Side`; this module does the rest:

- every call gets fresh input buffers on the device, each with GUARD bytes of 0xA5 on both
  sides, filled from the set's bytes; buffers of a round stay alive to the round's end, so no
  address is reused inside a round (a cache keyed by pointer sees new pointers every call);
- a side that fills outputs (a C launcher) gets fresh guarded outputs filled with the sentinel;
  a side that returns outputs (a KernelBench `ModelNew`) has them described in `out_meta`
  (dtype, shape, whether the tensor is a plain `torch.Tensor`, which input it aliases);
- timed devices: `warmup` calls per side first (fresh inputs, like timed calls), an L2 flush
  before every call, events around the call with a device-wide synchronise before the end event;
  the interpreter reports `ns: null` and nothing else about time;
- the in-process reference (header `reference`) is timed on the same sets, the order of the two
  sides drawn at random per round (`ref_done` frames); its outputs are not returned;
- after a round it returns the outputs of the calls `returned_calls` draws, then scrubs every
  output of the round (NaN or all-ones) so a later call cannot find an earlier result in freed
  memory, and reports what changed in the integrity snapshot and the thread count.
"""

from __future__ import annotations

import random
import struct
import sys
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import devices
import torch
from wire_child import GO, Channel, read_exact, read_request, returned_calls, wait_control

GUARD = 256  # bytes each side; keeps data 256-byte aligned (Triton specialises on 16-byte alignment)
GUARD_VALUE = 0xA5
TORCH_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
MAX_ERROR_CHARS = 3000


@dataclass
class Side:
    """One callable side: the candidate or the reference."""

    name: str  # "candidate" | "reference"
    call: Callable[[list[Any]], Any]  # receives the argument list the side takes (see arguments())
    fills_outputs: bool  # True: a launcher writing into harness-owned outputs; False: returns them
    takes_scalars: bool = False  # launchers take the scalar args (sizes, attrs) at their positions
    upcast_bf16: bool = False  # the interpreter's gap: bf16 tensors are placed as float32
    notes: list[str] = field(default_factory=list)
    host_guard: Any = None  # hostguard.HostGuard around the call (a Python `forward`), or None


def guarded_call(side: Side, args: list[Any]) -> Any:
    """The side's call, inside its host guard when it has one (hostguard.py)."""
    guard = side.host_guard
    if guard is None:
        return side.call(args)
    import hostguard

    with guard:
        result = side.call(args)
        if not hostguard.still_installed(guard):
            guard.refused.append("the host guard was removed from torch's dispatch-mode stack")
    return result


class Guarded:
    """`nbytes` bytes on the device between two GUARD-byte runs of 0xA5."""

    def __init__(self, nbytes: int, dtype: torch.dtype, shape: list[int], device: torch.device) -> None:
        self.nbytes = nbytes
        self.raw = torch.empty(2 * GUARD + nbytes, dtype=torch.uint8, device=device)
        self.raw[:GUARD].fill_(GUARD_VALUE)
        self.raw[GUARD + nbytes :].fill_(GUARD_VALUE)
        self.bytes = self.raw[GUARD : GUARD + nbytes]
        self.tensor = (
            self.bytes.view(dtype).view(shape) if nbytes else torch.empty(shape, dtype=dtype, device=device)
        )

    def guards_ok(self) -> bool:
        return bool((self.raw[:GUARD] == GUARD_VALUE).all()) and bool(
            (self.raw[GUARD + self.nbytes :] == GUARD_VALUE).all()
        )

    def first_changed(self, original: torch.Tensor) -> int:
        if not self.nbytes:
            return -1
        diff = (self.bytes != original).nonzero()
        return int(diff[0, 0]) if diff.numel() else -1


def _u8(blob: memoryview, span: list[int], device: torch.device) -> torch.Tensor:
    off, length = int(span[0]), int(span[1])
    if length == 0:
        return torch.empty(0, dtype=torch.uint8, device=device)
    return torch.frombuffer(blob[off : off + length], dtype=torch.uint8).to(device)


def tensor_bytes(t: torch.Tensor) -> bytes:
    flat = t.detach().contiguous().reshape(-1).cpu()
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def scrub(t: torch.Tensor) -> None:
    """Overwrite an output before it is freed (reference results must not survive in free memory)."""
    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        return
    try:
        if t.is_floating_point():
            t.detach().fill_(float("nan"))
        else:
            t.detach().fill_(True if t.dtype == torch.bool else -1)
    except RuntimeError:
        pass  # a read-only or expanded view: its base is scrubbed with the side's buffers


@dataclass
class CallResult:
    ns: int | None
    wall_ns: int | None
    stream_ns: int | None
    inputs_changed: list[int]
    guards: list[bool]
    outputs: list[torch.Tensor]
    out_meta: list[dict[str, Any]]
    status: int | None
    in_spans: list[list[int]]  # [address, length] of each input's guarded region (host memory)
    refused: list[str]  # aten ops the host guard refused during the call
    keep: list[Any]  # buffers kept alive until the round ends


class Runner:
    def __init__(self, header: dict[str, Any], blob: memoryview, ops: devices.DeviceOps) -> None:
        self.header, self.blob, self.ops = header, blob, ops
        self.args: list[dict[str, Any]] = header["args"]
        self.dev = ops.torch_device
        self.patterns = {
            i: bytes.fromhex(a.get("fill", "") or "00") for i, a in enumerate(self.args) if a["kind"] == "out"
        }

    # -- one call --------------------------------------------------------------------------------
    def call(self, side: Side, spans: list[list[int]], blob: memoryview | bytearray) -> CallResult:
        """One call on the inputs at `spans` of this round's `blob` (docs/target_seam.md: rounds
        are streamed, so no later round's inputs are ever in this process)."""
        call_args: list[Any] = []
        ins: list[tuple[Guarded, torch.Tensor]] = []
        outs: list[Guarded] = []
        j = 0
        for i, a in enumerate(self.args):
            kind = a["kind"]
            if kind == "in":
                original = _u8(memoryview(blob), spans[j], self.dev)
                j += 1
                dtype = TORCH_DTYPES[a["dtype"]]
                if side.upcast_bf16 and dtype == torch.bfloat16:
                    original = original.view(torch.bfloat16).float().view(torch.uint8)
                    dtype = torch.float32
                buf = Guarded(original.numel(), dtype, list(a["shape"]), self.dev)
                buf.bytes.copy_(original)
                ins.append((buf, original))
                call_args.append(buf.tensor)
            elif kind == "out":
                if side.fills_outputs:
                    buf = Guarded(int(a["nbytes"]), TORCH_DTYPES[a["dtype"]], list(a["shape"]), self.dev)
                    pattern = self.patterns[i]
                    if buf.nbytes:
                        reps = buf.nbytes // len(pattern) + 1
                        fill = torch.frombuffer(bytearray((pattern * reps)[: buf.nbytes]), dtype=torch.uint8)
                        buf.bytes.copy_(fill.to(self.dev))
                    outs.append(buf)
                    call_args.append(buf.tensor)
            elif side.takes_scalars:
                call_args.append(int(a["value"]) if kind == "i64" else float(a["value"]))
        self.ops.flush()
        result, ns, wall = self.ops.time_call(lambda: guarded_call(side, call_args))
        refused = side.host_guard.take() if side.host_guard is not None else []
        # Inputs in host memory, placed as sent (not upcast): the harness reads them itself.
        host_inputs = self.dev.type == "cpu" and not side.upcast_bf16
        self.ops.synchronize()
        status = int(result) if side.fills_outputs and isinstance(result, int) else None
        outputs = [b.tensor for b in outs] if side.fills_outputs else _as_outputs(result)
        input_storages = [buf.raw.untyped_storage().data_ptr() for buf, _ in ins]
        meta = [_describe(t, input_storages) for t in outputs]
        if side.upcast_bf16:
            outputs = self._downcast(outputs)
            for m, t in zip(meta, outputs, strict=False):
                if "dtype" in m and isinstance(t, torch.Tensor):
                    m["dtype"] = str(t.dtype).removeprefix("torch.")
        return CallResult(
            ns=ns,
            wall_ns=wall,
            stream_ns=self.ops.last_stream_ns if ns is not None else None,
            inputs_changed=[buf.first_changed(orig) for buf, orig in ins],
            guards=[buf.guards_ok() for buf, _ in ins] + [b.guards_ok() for b in outs],
            outputs=outputs,
            out_meta=meta,
            status=status,
            in_spans=[[b.raw.data_ptr(), b.raw.numel()] for b, _ in ins] if host_inputs else [],
            refused=refused,
            keep=[ins, outs, result],
        )

    def _downcast(self, outputs: list[torch.Tensor]) -> list[torch.Tensor]:
        wanted = [a["dtype"] for a in self.args if a["kind"] == "out"]
        return [
            t.to(torch.bfloat16)
            if i < len(wanted)
            and wanted[i] == "bfloat16"
            and isinstance(t, torch.Tensor)
            and t.dtype == torch.float32
            else t
            for i, t in enumerate(outputs)
        ]


def _as_outputs(result: Any) -> list[Any]:
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]


def _describe(t: Any, input_storages: list[int]) -> dict[str, Any]:
    if not isinstance(t, torch.Tensor):
        return {"type": type(t).__name__}
    ptr = t.untyped_storage().data_ptr() if t.numel() else 0
    return {
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
        "plain": type(t) is torch.Tensor,  # a subclass can defer its work until it is read
        "device": t.device.type,
        "alias": input_storages.index(ptr) if ptr and ptr in input_storages else -1,
        # Outputs of a round stay alive until it ends, so two calls returning the same storage
        # means a buffer kept across calls (a cache), never allocator reuse.
        "storage": ptr,
    }


def error_text(exc: BaseException, file_hint: str = "kernel.py") -> str:
    """The exception and the traceback lines from the candidate's file, capped."""
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    keep = [ln for ln in lines if file_hint in ln or not ln.startswith("  File")]
    text = "".join(keep[-12:]).strip()
    return text[-MAX_ERROR_CHARS:]


def load_reference(header: dict[str, Any], ops: devices.DeviceOps) -> Side | None:
    """The task's own `Model`, from the header's `reference` (task source, sizes, init)."""
    ref = header.get("reference")
    if not ref:
        return None
    module = types.ModuleType("sage_reference")  # never put in sys.modules: the candidate cannot find it
    module.__file__ = ref.get("task_file", "task.py")
    exec(compile(ref["task_source"], module.__file__, "exec"), module.__dict__)
    for name, value in (ref.get("sizes") or {}).items():
        setattr(module, name, int(value))
    torch.manual_seed(int(ref.get("seed", 0)))
    model = module.Model(*ref.get("init", [])).to(ops.torch_device).eval()

    def call(args: list[Any]) -> Any:
        with torch.no_grad():
            return model(*args)

    return Side("reference", call, fills_outputs=False)


def _watch_own_code() -> None:
    """The functions that compute the evidence, watched like torch's (devices.watch)."""
    import hostguard

    own = {
        "loop.Guarded.guards_ok": lambda: Guarded.guards_ok,
        "loop.Guarded.first_changed": lambda: Guarded.first_changed,
        "loop.Runner.call": lambda: Runner.call,
        "loop.guarded_call": lambda: guarded_call,
        "loop.tensor_bytes": lambda: tensor_bytes,
        "loop.scrub": lambda: scrub,
        "loop._describe": lambda: _describe,
        "loop.Channel.send": lambda: Channel.send,
        "hostguard.HostGuard.__torch_dispatch__": lambda: hostguard.HostGuard.__torch_dispatch__,
        "hostguard.HostGuard.take": lambda: hostguard.HostGuard.take,
        "hostguard.HostGuard.refuse": lambda: hostguard.HostGuard.refuse,
        "hostguard.still_installed": lambda: hostguard.still_installed,
    }
    for name, read in own.items():
        devices.watch(name, read)


def lock(stage: str) -> str:
    """Install the sandbox's seccomp deny-lists (harness/children/guard.py, staged beside this
    file): "process" (no network, no new processes), then "files" (no opening files)."""
    import guard

    return guard.lock_process() if stage == "process" else guard.lock_files()


def serve(
    runtime: str,
    device: str,
    load_candidate: Callable[[dict[str, Any], memoryview, devices.DeviceOps], Side],
    lock_at: str = "load",
    prepare: Callable[[dict[str, Any], devices.DeviceOps], None] | None = None,
) -> int:
    """Run one request from stdin to the end frame. Returns the exit status.

    `lock_at`: "load" locks the process (both seccomp lists) once the candidate and the reference
    are loaded; "first_round" after the first round (a JIT that compiles at the first call).
    `prepare` runs the runtime's own setup (imports, patches of the toolchain it owns) before the
    integrity snapshot, so that only what the candidate changes is reported."""
    header, blob = read_request(sys.stdin.buffer)
    chan = Channel.from_env(header["nonce"])
    chan.send({"kind": "hello", "runtime": runtime, "seccomp": devices.seccomp_state(),
               "device_view": devices.device_view()})
    try:
        ops = devices.make_device(device)
    except Exception as exc:
        chan.send({"kind": "load_error", "error": f"device {device} unusable: {exc}"})
        chan.send({"kind": "end"})
        return 0
    try:
        if prepare is not None:
            prepare(header, ops)
    except Exception as exc:
        chan.send({"kind": "load_error", "error": f"the runtime could not prepare: {error_text(exc)}"})
        chan.send({"kind": "end"})
        return 0
    _watch_own_code()
    # Bound now, before any candidate code runs: a candidate replacing the module attributes
    # later changes nothing this loop calls (and the snapshot reports the replacement).
    snapshot, changed, thread_count = devices.snapshot, devices.changed, devices.thread_count
    before = snapshot()
    try:
        candidate = load_candidate(header, blob, ops)
    except Exception as exc:
        chan.send({"kind": "load_error", "error": error_text(exc)})
        chan.send({"kind": "end"})
        return 0
    try:
        reference = load_reference(header, ops)
    except Exception as exc:
        chan.send({"kind": "load_error", "error": f"the reference did not load: {error_text(exc, 'task')}"})
        chan.send({"kind": "end"})
        return 0
    locks: list[str] = []
    if lock_at == "load":
        locks = [lock("process"), lock("files")]
    runner = Runner(header, blob, ops)
    warmup = 0  # the harness's first timed round is the warm-up, on inputs of its own
    sides = [candidate] + ([reference] if reference else [])
    integrity = changed(before, snapshot())
    threads = thread_count()
    chan.send(
        {
            "kind": "loaded",
            "device": ops.name,
            "timed": ops.timed,
            "warmup": warmup,
            "notes": ops.notes + candidate.notes,
            "integrity": integrity,
            "threads": threads,
            "seccomp": devices.seccomp_state(),
            "locks": locks,
            "host_guard": candidate.host_guard is not None,
        }
    )
    held: list[Any] = []  # the last round's buffers, alive until the harness has read them
    stopped = False
    for r, rnd in enumerate(header["rounds"]):
        if wait_control(sys.stdin.buffer) != GO:
            stopped = True
            break
        held.clear()
        (size,) = struct.unpack("<Q", read_exact(sys.stdin.buffer, 8))
        round_blob = bytearray(read_exact(sys.stdin.buffer, size))
        order = sides[:]
        random.SystemRandom().shuffle(order)
        kept: list[Any] = []
        for side in order:
            results: list[CallResult] = []
            for i, spans in enumerate(rnd["calls"]):
                try:
                    res = runner.call(side, spans, round_blob)
                except Exception as exc:
                    failed: dict[str, Any] = {
                        "kind": "call_error",
                        "call": i,
                        "side": side.name,
                        "error": error_text(exc),
                    }
                    if side.host_guard is not None and side.host_guard.refused:
                        failed["refused"] = side.host_guard.take()
                    chan.send(failed)
                    chan.send({"kind": "end"})
                    return 0
                results.append(res)
                kept.append(res.keep)
                frame: dict[str, Any] = {
                    "kind": "done" if side is candidate else "ref_done",
                    "call": i,
                    "ns": res.ns,
                }
                if res.wall_ns is not None:
                    frame["wall_ns"] = res.wall_ns
                    frame["stream_ns"] = res.stream_ns
                if side is candidate:
                    if res.in_spans:
                        frame["in_spans"] = res.in_spans
                    frame.update(
                        inputs_changed=res.inputs_changed,
                        guards=res.guards,
                        fpenv="ok",
                        threads=thread_count(),
                    )
                    if res.status is not None:
                        frame["status"] = res.status
                    if res.refused:
                        frame["refused"] = res.refused
                chan.send(frame)
            if side is candidate:
                for i in returned_calls(len(results), rnd["return"]):
                    res = results[i]
                    payload = b"".join(tensor_bytes(t) for t in res.outputs if isinstance(t, torch.Tensor))
                    record: dict[str, Any] = {"kind": "outputs", "call": i, "out_meta": res.out_meta}
                    chan.send(record, payload)
            for res in results:
                for t in res.outputs:
                    scrub(t)
        # Kept until the next control byte: the harness reads the inputs' memory from outside this
        # process after `round_end`, while this loop waits (harness/runtime_memory.py).
        held.append(kept)
        del kept
        if lock_at == "first_round" and r == 0:
            locks = [lock("process"), lock("files")]
        chan.send(
            {
                "kind": "round_end",
                "round": r,
                "integrity": changed(before, snapshot()),
                "threads": thread_count(),
                "seccomp": devices.seccomp_state(),
            }
        )
    if held and not stopped:
        wait_control(sys.stdin.buffer)  # the harness's Q (or end of input): it has read the inputs
    chan.send({"kind": "end"})
    return 0
