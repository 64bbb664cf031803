"""Inside the sandbox: time the task's PyTorch reference, round by round, in its own process.

The candidate never shares this address space (the CPU target's candidate runs in the native
driver), so nothing it does can patch this timer, change torch's allocator or signal handlers, or
slow the reference. The harness interleaves this process's rounds with the candidate's and checks
the reference's times against rounds timed before the candidate was even loaded. Stdlib, torch and
sagekernel.tasks only; speaks the wire of docs/target_seam.md.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from guard import lock_process, preload, reap
from wire_child import GO, Channel, read_request, wait_control


def main() -> int:
    header, _artifact = read_request(sys.stdin.buffer)  # the reference needs no artifact
    sys.path.extend(p for p in header["reference"].get("site", []) if p not in sys.path)
    chan = Channel.from_env(header["nonce"])
    import torch

    from sagekernel.tasks.record import task_from_json
    from sagekernel.tasks.reference import make_model

    ref = header["reference"]
    work = Path(tempfile.gettempdir()) / f"sage-ref-{header['nonce']}"
    work.mkdir()
    for name, text in ref.get("companions", {}).items():  # files the task reads next to itself
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text, encoding="utf-8")
    task_file = work / ref["task_file"]
    task_file.write_text(ref["task_source"], encoding="utf-8")
    task = task_from_json(ref["record"], source_path=task_file)
    torch.set_num_threads(int(header["threads"]))
    model = make_model(task, ref["sizes"])
    dtypes = {
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
    ins = [a for a in header["args"] if a["kind"] == "in"]
    n_inputs = len(task.inputs)  # the kernel's parameters follow the inputs; the reference has its own
    baseline = ref.get("baseline", "eager")
    # torch.compile runs the compiler (new processes): before the process is locked, warmed on
    # public inputs of the timed shape so that no timed call pays for compilation.
    compiled = compile_model(model, task, ref["sizes"], work) if baseline in ("compile", "best") else None
    seccomp = lock_process()
    chan.send(
        {
            "kind": "hello",
            "runtime": "torch-reference",
            "seccomp": seccomp,
            "torch_threads": torch.get_num_threads(),
        }
    )
    chan.send({"kind": "loaded"})
    for r, rnd in enumerate(header["rounds"]):
        if wait_control(sys.stdin.buffer) != GO:
            break
        (n,) = __import__("struct").unpack("<Q", sys.stdin.buffer.read(8))
        data = bytearray(n)
        view = memoryview(data)
        pos = 0
        while pos < n:
            got = sys.stdin.buffer.readinto(view[pos:])  # type: ignore[union-attr]
            if not got:
                return 1
            pos += got
        sets = []
        for spans in rnd["calls"]:
            tensors = []
            for arg, (off, length) in zip(ins, spans, strict=True):
                raw = (
                    torch.frombuffer(data, dtype=torch.uint8, count=length, offset=off)
                    if length
                    else torch.empty(0, dtype=torch.uint8)
                )
                tensors.append(raw.clone().view(dtypes[arg["dtype"]]).reshape(arg["shape"]))
            sets.append(tensors)
        with torch.no_grad():
            if compiled is not None and baseline == "best":
                # Both, in an order alternating by round (the second side reads warmer caches); the
                # faster round stands: the baseline is the better of eager and compiled.
                first, second = (model, compiled) if r % 2 == 0 else (compiled, model)
                times = min(time_calls(first, task, sets, n_inputs), time_calls(second, task, sets, n_inputs),
                            key=sum)
            else:
                times = time_calls(compiled if compiled is not None else model, task, sets, n_inputs)
            for i, ns in enumerate(times):
                chan.send(
                    {
                        "kind": "done",
                        "call": i,
                        "ns": ns,
                        "inputs_changed": [-1] * len(ins),
                        "guards": [],
                        "fpenv": "ok",
                    }
                )
        chan.send({"kind": "round_end", "round": r})
    chan.send({"kind": "end"})
    return 0


def time_calls(fn: Any, task: Any, sets: list[Any], n_inputs: int) -> list[int]:
    """Per-call wall time (ns) of `fn` on each input set, in order."""
    from sagekernel.tasks.inputs import assemble_call

    out = []
    for tensors in sets:
        t0 = time.perf_counter_ns()
        fn(*assemble_call(task, tensors[:n_inputs]))
        out.append(time.perf_counter_ns() - t0)
    return out


def compile_model(model: Any, task: Any, sizes: dict[str, int], work: Path) -> Any:
    """`torch.compile(model)` (inductor, one compile thread, its cache in the private directory),
    compiled and warmed on seed-0 inputs of the timed shape."""
    import torch

    from sagekernel.tasks.inputs import assemble_call
    from sagekernel.tasks.loader import build_inputs

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(work / "inductor")
    os.environ.setdefault("USER", "sage")  # inductor names its default directories after the user
    torch._inductor.config.compile_threads = 1
    fn = torch.compile(model)
    sample = build_inputs(task, sizes, 0, "default")
    with torch.no_grad():
        for _ in range(2):
            fn(*assemble_call(task, sample[: len(task.inputs)]))
    return fn


def _limit(which: int, value: int) -> None:
    import resource

    _soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def serve(site: list[str]) -> int:
    """Warm mode (harness/warm.py): import torch once; per job (a SOCK_SEQPACKET packet on the
    control socket carrying the request pipe's read end and a fresh result pipe's write end) fork
    a child that runs `main()` in its own session, limits and private directory; reap it (killing
    its group after the wall limit), wipe its directory, answer with one exit packet."""
    import contextlib
    import json
    import resource
    import shutil
    import signal
    import socket

    sys.path.extend(p for p in site if p not in sys.path)
    import torch  # noqa: F401  (the point of the server: pay for this once)

    import sagekernel.tasks.inputs  # noqa: F401

    preload()
    ctl = socket.socket(fileno=int(os.environ["SAGE_RESULT_FD"]))
    base = tempfile.gettempdir()
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(ctl, 1 << 16, 2)
        except OSError:
            return 0
        if not msg:
            return 0
        job = json.loads(msg)
        if len(fds) != 2 or not str(job.get("nonce", "")).isalnum():
            for fd in fds:
                os.close(fd)
            continue
        req_fd, res_fd = fds
        workdir = os.path.join(base, f"sage-refjob-{job['nonce']}")
        os.mkdir(workdir, 0o700)
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                ctl.close()
                os.setsid()
                _limit(resource.RLIMIT_CPU, int(job["cpu_s"]))
                _limit(resource.RLIMIT_FSIZE, int(job["fsize_bytes"]))
                _limit(resource.RLIMIT_CORE, 0)
                log = os.open(
                    os.path.join(workdir, "child.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600
                )
                os.dup2(req_fd, 0)
                os.dup2(log, 1)
                os.dup2(log, 2)
                if res_fd != 3:
                    os.dup2(res_fd, 3)
                os.closerange(4, 1 << 16)
                os.environ["SAGE_RESULT_FD"] = "3"
                os.chdir(workdir)
                tempfile.tempdir = workdir
                status = main()
            except BaseException:  # report on stderr (the log); never fall back into the server loop
                with contextlib.suppress(BaseException):
                    import traceback

                    traceback.print_exc()
            finally:
                os._exit(status)
        os.close(req_fd)
        os.close(res_fd)
        timed_out, wstatus = reap(pid, float(job["wall_s"]))
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        tail = b""
        with contextlib.suppress(OSError), open(os.path.join(workdir, "child.log"), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 2000))
            tail = f.read()
        shutil.rmtree(workdir, ignore_errors=True)
        record = {
            "status": os.WEXITSTATUS(wstatus) if os.WIFEXITED(wstatus) else None,
            "signal": os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else None,
            "timed_out": timed_out,
            "tail": tail.decode("utf-8", "replace"),
        }
        try:
            ctl.send(json.dumps(record).encode())
        except OSError:
            return 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--serve":
        sys.exit(serve(sys.argv[2:]))
    sys.exit(main())
