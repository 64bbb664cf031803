"""Inside the sandbox: time the candidate and the PyTorch reference, interleaved, same threads.

Protocol (eval_integrity.md §3c): after warm-up, `rounds` rounds; each round runs the two sides in
random order (AB or BA), `iters // rounds` calls each, timed with perf_counter_ns around the
round's calls. The candidate rotates through a pool of input buffers whose contents (sent by the
parent, secret-seeded) are re-assigned by a fresh random permutation every round, so results cached
by pointer go stale; the reference rotates through its own inputs built here. After a round the
child decides at random whether to return the candidate's outputs for a recheck (the decision is
made after the round, so the kernel cannot know during it). The parent computes every statistic.
"""

from __future__ import annotations

import ctypes
import gc
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import contextlib

from guard import Channel, lock_files, lock_process, preload, read_request, reap


def _prepare_paths(pkg: str, site: list[str]) -> None:
    if pkg not in sys.path:
        sys.path.insert(0, pkg)
    sys.path.extend(p for p in site if p not in sys.path)  # run with -S: only the paths the parent names


def time_request(header: dict, blob: memoryview, chan: Channel) -> None:
    """One timing job. The library and the task file travel in the request and are written to a
    private directory here, so a long-lived server needs no per-request mounts."""
    import tempfile

    import torch

    from sagekernel.tasks.inputs import build_inputs, make_model
    from sagekernel.tasks.task import Task, TensorSpec

    work = Path(tempfile.gettempdir()) / f"sage-timing-{header['nonce']}"
    work.mkdir()
    lib_off, lib_len = header["lib_span"]
    lib_path = work / "kernel.so"
    lib_path.write_bytes(blob[lib_off : lib_off + lib_len])
    task_file = work / header["task_file_name"]
    task_file.write_text(header["task_source"], encoding="utf-8")
    threads = int(header["threads"])
    torch.set_num_threads(threads)
    t = header["task"]
    task = Task(
        name=t["name"],
        level=t["level"],
        category=t["category"],
        description="",
        source_path=task_file,
        inputs=[TensorSpec(n, tuple(d), dt) for n, d, dt in t["inputs"]],
        outputs=[TensorSpec(n, tuple(d), dt) for n, d, dt in t["outputs"]],
        attrs=t["attrs"],
        sizes=t["sizes"],
        variants=[],
        dtype=t["dtype"],
        atol=t["atol"],
        rtol=t["rtol"],
    )
    sizes = header["sizes"]
    pool = int(header["pool"])
    model = make_model(task, sizes)
    ref_inputs = [build_inputs(task, sizes, int(header["ref_seed"]) + j, "default") for j in range(pool)]
    with torch.no_grad():
        model(*ref_inputs[0])  # first call may lazily initialise torch internals (files, thread pool)

    seccomp = lock_process()
    chan.send({"kind": "hello", "seccomp": seccomp, "torch_threads": torch.get_num_threads()})
    try:
        lib = ctypes.CDLL(str(lib_path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        fn = getattr(lib, header["symbol"])
    except (OSError, AttributeError) as exc:
        chan.send({"kind": "load_error", "error": str(exc)})
        return
    fn.restype = None
    lock_files()
    chan.send({"kind": "loaded"})

    contents = [
        [
            torch.frombuffer(blob, dtype=torch.uint8, count=n, offset=off)
            if n
            else torch.empty(0, dtype=torch.uint8)
            for off, n in spans
        ]
        for spans in header["contents"]
    ]
    in_bufs = [[torch.empty(n, dtype=torch.uint8) for _, n in header["contents"][0]] for _ in range(pool)]
    out_bufs = [[torch.empty(n, dtype=torch.uint8) for n in header["out_sizes"]] for _ in range(pool)]
    fills = [bytes.fromhex(f) for f in header["fills"]]
    fill_tensors = [torch.frombuffer(bytearray(f), dtype=torch.uint8) for f in fills]
    scalars: list[object] = [
        ctypes.c_int64(int(v)) if k == "i64" else ctypes.c_float(float(v)) for k, v in header["scalars"]
    ]
    argsets = [
        [ctypes.c_void_p(b.data_ptr()) for b in in_bufs[j] + out_bufs[j]] + scalars for j in range(pool)
    ]

    def assign(perm: list[int]) -> None:
        for j, c in enumerate(perm):
            for buf, src in zip(in_bufs[j], contents[c], strict=False):
                buf.copy_(src)
            for buf, pat in zip(out_bufs[j], fill_tensors, strict=False):
                if buf.numel():
                    reps = buf.numel() // pat.numel() + 1
                    buf.copy_(pat.repeat(reps)[: buf.numel()])

    def run_candidate(n: int) -> int:
        t0 = time.perf_counter_ns()
        for c in range(n):
            fn(*argsets[c % pool])
        return time.perf_counter_ns() - t0

    def run_reference(n: int) -> int:
        with torch.no_grad():
            t0 = time.perf_counter_ns()
            for c in range(n):
                model(*ref_inputs[c % pool])
            return time.perf_counter_ns() - t0

    rng = random.SystemRandom()
    perm = list(range(pool))
    assign(perm)
    warmup = int(header["warmup"])
    run_candidate(warmup)
    run_reference(warmup)
    rounds = int(header["rounds"])
    per_round = max(1, int(header["iters"]) // rounds)
    recheck_p = float(header["recheck_probability"])
    gc.disable()
    wall0 = time.perf_counter_ns()
    cpu0 = time.process_time_ns()
    for r in range(rounds):
        rng.shuffle(perm)
        assign(perm)
        order = rng.choice(("AB", "BA"))
        if order == "AB":
            cand, ref = run_candidate(per_round), run_reference(per_round)
        else:
            ref, cand = run_reference(per_round), run_candidate(per_round)
        record = {
            "kind": "round",
            "round": r,
            "order": order,
            "cand_ns": cand,
            "ref_ns": ref,
            "calls": per_round,
        }
        if r == rounds - 1 or rng.random() < recheck_p:
            used = sorted({c % pool for c in range(per_round)})
            record["recheck"] = [[j, perm[j]] for j in used]
            payload = b"".join(
                bytes(out_bufs[j][k].numpy().tobytes()) for j in used for k in range(len(out_bufs[j]))
            )
            chan.send(record, payload)
        else:
            chan.send(record)
    gc.enable()
    chan.send(
        {"kind": "end", "wall_ns": time.perf_counter_ns() - wall0, "cpu_ns": time.process_time_ns() - cpu0}
    )


def main() -> int:
    """Cold mode: one request on stdin, timed in this process."""
    header, blob = read_request(sys.stdin.buffer)
    chan = Channel(int(os.environ["SAGE_RESULT_FD"]), header["nonce"])
    _prepare_paths(header["pkg"], header.get("site", []))
    time_request(header, blob, chan)
    return 0


def serve(pkg: str, site: list[str]) -> int:
    """Warm mode: import torch once, then fork one child per request (stdin, one after another).

    The server itself never runs candidate code. Each child starts a new session, lowers its
    rlimits, installs the seccomp filters (which also stop it signalling this server), times, and
    exits. The server reports how the child ended in an "exit" frame carrying the request's nonce.
    """
    import resource
    import shutil
    import tempfile

    _prepare_paths(pkg, site)
    import torch  # noqa: F401  (the point of the server: pay for this once)

    import sagekernel.tasks.inputs  # noqa: F401

    preload()  # the seccomp bindings, so no child pays for finding libseccomp
    fd = int(os.environ["SAGE_RESULT_FD"])
    stdin = sys.stdin.buffer
    while True:
        try:
            header, blob = read_request(stdin)
        except EOFError:
            return 0
        chan = Channel(fd, header["nonce"])
        pid = os.fork()
        if pid == 0:
            status = 0
            try:
                os.setsid()
                cpu = int(header["cpu_s"])
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
                time_request(header, blob, chan)
            except BaseException as exc:  # report, never propagate into the server loop
                with contextlib.suppress(OSError):
                    chan.send({"kind": "error", "error": f"{type(exc).__name__}: {exc}"})
                status = 1
            finally:
                os._exit(status)
        timed_out, wstatus = reap(pid, float(header["wall_s"]))
        shutil.rmtree(Path(tempfile.gettempdir()) / f"sage-timing-{header['nonce']}", ignore_errors=True)
        sig = os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else None
        code = os.WEXITSTATUS(wstatus) if os.WIFEXITED(wstatus) else None
        chan.send({"kind": "exit", "status": code, "signal": sig, "timed_out": timed_out})


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--serve":
        sys.exit(serve(sys.argv[2], sys.argv[3:]))
    sys.exit(main())
