"""The same experiment on a Ray cluster: one Ray task per stream (`--ray ADDRESS|auto|local`).

Each stream asks for its device as a Ray resource: `num_gpus=1` for CUDA/Triton-on-GPU streams,
the `NPU` resource for Ascend streams (Ray sets ASCEND_RT_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES
in the task, so two streams never share a card), CPUs otherwise. Donors finish before their
recipients are submitted.

Where the results go:
- shared directory (the experiment directory is visible to the worker: the same host, or a
  shared file system; detected with a token file): the task runs in the stream's workspace in
  place. A lost worker's task is retried by Ray (`max_retries`) and resumes from its last
  recorded operator, because every finished operator is already in the workspace.
- no shared directory: the driver ships the stream's workspace (and its donor's) to the task as
  a tar archive and unpacks the workspace the task returns. A retry then starts from the state
  shipped with the attempt, i.e. what was recorded when the stream was submitted; operators a
  lost worker finished since are done again (a limitation of this mode, not of resume).

Streams on the embedded local model are submitted one at a time (each Ray task would load its
own copy of the weights on its node).
"""

from __future__ import annotations

import io
import secrets
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sagekernel.errors import SageError
from sagekernel.experiment.layout import ExperimentDir, StreamOutcome
from sagekernel.experiment.plan import StreamPlan, order
from sagekernel.experiment.scheduler import POLL_S, ExperimentOutcome, donors_done_outside

TOKEN_FILE = ".ray-token"
INSTALL_HINT = "pip install 'sagekernel[ray]'"


class RayUnavailable(SageError):
    """Ray is not installed, or the cluster cannot be reached."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable(
            f"--ray needs Ray, an optional extra that is not installed ({exc}); install it "
            f"with {INSTALL_HINT}"
        ) from exc
    return ray


def resources_for(stream: StreamPlan, cpus: float = 1.0) -> dict[str, Any]:
    """The Ray resource request of one stream (its device)."""
    device = (stream.device or "").lower()
    if stream.target == "ascendc" or device.startswith("npu"):
        return {"num_cpus": cpus, "resources": {"NPU": 1}}
    if stream.target == "cuda" or (stream.target == "triton" and device.startswith("cuda")):
        return {"num_cpus": cpus, "num_gpus": 1}
    return {"num_cpus": cpus}


def _pack(root: Path, members: list[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for member in members:
            if (root / member).exists():
                tar.add(root / member, arcname=member)
    return buf.getvalue()


def _unpack(data: bytes, dest: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")


def stream_task(root: str, name: str, token: str, payload: bytes | None) -> dict[str, Any]:
    """The body of one Ray task (runs on a worker)."""
    from sagekernel.experiment.worker import run_streams

    token_path = Path(root) / TOKEN_FILE
    shared = token_path.is_file() and token_path.read_text(encoding="utf-8").strip() == token
    if shared:
        outcome = run_streams(ExperimentDir(root), [name], device=_device_label())[0]
        return {"outcome": outcome.to_dict(), "archive": None}
    if payload is None:
        raise SageError(
            f"stream {name}: the experiment directory {root} is not visible on this worker and "
            "nothing was shipped"
        )
    with tempfile.TemporaryDirectory(prefix="sage-exp-") as tmp:
        _unpack(payload, Path(tmp))
        outcome = run_streams(ExperimentDir(tmp), [name], device=_device_label())[0]
        return {"outcome": outcome.to_dict(), "archive": _pack(Path(tmp), [f"streams/{name}"])}


def _device_label() -> str:
    from sagekernel.devices import selection_env

    visible = [f"{k}={v}" for k, v in selection_env().items() if v]
    return "ray:" + ",".join(visible) if visible else "ray"


def run_ray(
    exp: ExperimentDir,
    streams: list[StreamPlan],
    *,
    address: str = "auto",
    tick: Callable[[], None] | None = None,
    cpus_per_stream: float = 1.0,
    max_retries: int = 3,
    init: dict[str, Any] | None = None,
    ship: bool = False,
) -> ExperimentOutcome:
    """Run every unfinished stream as a Ray task; `address` "local" starts a local Ray instance
    (`init` are its ray.init arguments, e.g. num_cpus=2); `ship` forces the no-shared-directory mode."""
    ray = import_ray()
    started = time.monotonic()
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, **(init or {})}
        src = str(Path(__file__).resolve().parents[2])
        if address == "local":
            kwargs.setdefault("runtime_env", {"env_vars": {"PYTHONPATH": src}})
        try:
            ray.init(address=None if address == "local" else address, **kwargs)
        except (ConnectionError, RuntimeError) as exc:
            raise RayUnavailable(f"cannot reach the Ray cluster at {address!r}: {exc}") from exc
    token = secrets.token_hex(8)
    (exp.root / TOKEN_FILE).write_text("" if ship else token, encoding="utf-8")
    remote = ray.remote(stream_task)
    result = ExperimentOutcome()
    pending = list(order(streams))
    for s in list(pending):
        if exp.finished(s.name):
            result.finished.append(s.name)
            pending.remove(s)
    outside = donors_done_outside(exp, streams, pending)
    running: dict[Any, StreamPlan] = {}
    try:
        _drive(
            ray,
            remote,
            exp,
            pending,
            running,
            result,
            outside,
            token,
            ship,
            cpus_per_stream,
            max_retries,
            tick,
        )
    except BaseException:  # Ctrl-C: cancel the tasks (each records what finished), then stop
        for ref in running:
            ray.cancel(ref)
        raise
    if tick is not None:
        tick()
    result.wall_s = time.monotonic() - started
    return result


def _drive(
    ray: Any,
    remote: Any,
    exp: ExperimentDir,
    pending: list[StreamPlan],
    running: dict[Any, StreamPlan],
    result: ExperimentOutcome,
    outside: set[str],
    token: str,
    ship: bool,
    cpus_per_stream: float,
    max_retries: int,
    tick: Callable[[], None] | None,
) -> None:
    """Submit ready streams and collect finished tasks until nothing is left."""
    while pending or running:
        bad = set(result.failed) | set(result.blocked)
        for s in list(pending):
            if s.donor in bad:
                pending.remove(s)
                result.blocked.append(s.name)
        local_busy = any(s.uses_local_model for s in running.values())
        for s in [s for s in pending if s.donor is None or s.donor in result.finished or s.donor in outside]:
            if s.uses_local_model and local_busy:
                continue
            local_busy = local_busy or s.uses_local_model
            payload = None
            if ship:
                members = ["experiment.toml", "experiment.json", f"streams/{s.name}"]
                members += [f"streams/{s.donor}"] if s.donor else []
                payload = _pack(exp.root, members)
            ref = remote.options(
                max_retries=max_retries,
                retry_exceptions=False,
                name=f"sage-stream-{s.name}",
                **resources_for(s, cpus_per_stream),
            ).remote(str(exp.root.resolve()), s.name, token, payload)
            running[ref] = s
            pending.remove(s)
        if not running:
            for s in pending:
                result.blocked.append(s.name)
            break
        done, _ = ray.wait(list(running), num_returns=1, timeout=POLL_S)
        for ref in done:
            s = running.pop(ref)
            try:
                reply = ray.get(ref)
            except Exception as exc:  # the task failed after its retries (ray.exceptions.*)
                result.failed[s.name] = f"Ray task failed: {type(exc).__name__}: {exc}"
                continue
            if reply.get("archive"):
                _unpack(reply["archive"], exp.root)
            outcome = StreamOutcome(**reply["outcome"])
            if exp.finished(s.name):
                result.finished.append(s.name)
            else:
                result.failed[s.name] = outcome.message or outcome.state
        if tick is not None:
            tick()
