"""The Ascend C target (the paper's own NPU target): AscendCTarget implements `Target`.

Devices: `npu` (hardware, timed: torch_npu on an Ascend NPU) and `cpu-twin` (CANN CPU twin
debug: emulated, never timed). Everything up to the build plan runs without CANN; building and
running need the toolkit (and torch_npu plus an NPU for `npu`), and say which piece is missing.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from sagekernel.candidate import Candidate
from sagekernel.seam import LAUNCH_SYNC_MS, LintFinding
from sagekernel.targets.ascendc import availability
from sagekernel.targets.ascendc.benchmark_binding import (
    runtime_attr_layout,
    runtime_attr_names,
    runtime_lists,
)
from sagekernel.targets.ascendc.build import execute
from sagekernel.targets.ascendc.config import AscendConfig
from sagekernel.targets.ascendc.contract import contract_text, files_for
from sagekernel.targets.ascendc.contract import template_of as contract_template
from sagekernel.targets.ascendc.lint import lint_candidate
from sagekernel.targets.ascendc.names import benchmark_layout_missing, is_benchmark_task, op_names
from sagekernel.targets.ascendc.plans import BuildPlan, build_plan
from sagekernel.targets.ascendc.runtime.ascendc_runtime import protocol_text
from sagekernel.targets.ascendc.settings import task_settings
from sagekernel.targets.ascendc.skeleton import op_attrs
from sagekernel.targets.base import (
    BuildResult,
    DeviceInfo,
    Evidence,
    FileSpec,
    Knowledge,
    RuntimeSpec,
    load_knowledge,
)
from sagekernel.targets.diagnostics import DiagnosticProbe, DiagnosticSection, TargetDiagnostics
from sagekernel.tasks.task import Task

HERE = Path(__file__).resolve().parent
RUNTIME_DIR = HERE / "runtime"
WIRE_DIR = HERE.parent.parent / "harness" / "children"
BOX_RUNTIME, BOX_WIRE = "/box/ascendc", "/box/wire"
#: H3: CANN's error detail on the runtime's stderr (the harness keeps it), not in plog files under
#: a sandbox HOME that is thrown away; level 3 = errors only.
RUNTIME_LOG_ENV = {"ASCEND_SLOG_PRINT_TO_STDOUT": "1", "ASCEND_GLOBAL_LOG_LEVEL": "3"}
DEVICES = (DeviceInfo("npu", Evidence.HARDWARE, True), DeviceInfo("cpu-twin", Evidence.EMULATED, False))


class AscendCTarget:
    name = "ascendc"
    language = "cpp"

    def __init__(self, config: AscendConfig | None = None, timing_protocol: str | None = None) -> None:
        self._config = config
        self._protocol = timing_protocol

    @property
    def timing_protocol(self) -> str:
        """`batched` (the paper's C.4, the default) or `cold-l2` (SAGE_ASCENDC_TIMING overrides)."""
        from sagekernel.targets.ascendc.runtime.ascendc_runtime import DEFAULT_PROTOCOL, PROTOCOLS

        chosen = self._protocol or os.environ.get("SAGE_ASCENDC_TIMING") or DEFAULT_PROTOCOL
        if chosen not in PROTOCOLS:
            raise ValueError(f"SAGE_ASCENDC_TIMING={chosen!r}: use one of {', '.join(PROTOCOLS)}")
        return chosen

    @property
    def config(self) -> AscendConfig:
        return self._config or AscendConfig.from_env()

    def devices(self) -> list[DeviceInfo]:
        return list(DEVICES)

    def available(self, device: str) -> tuple[bool, str]:
        return availability.available(device)

    def files(self, task: Task) -> list[FileSpec]:
        return files_for(task, self.config)

    def folder_files(self, task: Task, directory: Path) -> tuple[dict[str, Path], list[str]]:
        """A candidate kept as a folder (`sage eval TASK DIR`): the contract's files by path and,
        for an NPUKernelBench operator, its helper files (benchmark_project.project_files_in)."""
        from sagekernel.candidate import folder_files
        from sagekernel.targets.ascendc.benchmark_project import project_files_in

        wanted = [f.path for f in self.files(task)]
        if is_benchmark_task(task):
            return project_files_in(directory, wanted, op_names(task))
        return folder_files(directory, wanted)

    def missing_files(self, task: Task, candidate: Candidate) -> list[str]:
        """The contract's files a candidate lacks (the harness refuses it before building). An
        NPUKernelBench operator's project needs only what the benchmark's build needs: its kernel
        source and a host source, the host side split and the tiling header named as it likes
        (names.benchmark_layout_missing)."""
        given = {p for p, text in candidate.files.items() if text.strip()}
        if is_benchmark_task(task):
            return benchmark_layout_missing(given, op_names(task))
        return [f.path for f in self.files(task) if f.path not in given]

    def contract(self, task: Task) -> str:
        return contract_text(task, self.config)

    def knowledge(self) -> Knowledge:
        return load_knowledge(HERE / "knowledge")

    def lint(self, candidate: Candidate, task: Task) -> list[LintFinding]:
        return lint_candidate(candidate, task, self.config, run_tiling=True)

    def seed_memory_path(self) -> Path:
        return HERE / "knowledge" / "seed_memory.jsonl"

    def plan(self, candidate: Candidate, task: Task, workdir: Path, *, device: str = "npu") -> BuildPlan:
        return build_plan(candidate, task, workdir, device=device, config=self.config)

    def build(
        self,
        candidate: Candidate,
        task: Task,
        workdir: Path,
        *,
        device: str,
        sandbox_kind: str,
        timeout_s: float,
    ) -> BuildResult:
        del (
            sandbox_kind
        )  # see build.py: toolchain steps need the CANN tree; the model's code is only compiled
        plan = self.plan(candidate, task, workdir, device=device)
        if timeout_s:
            plan = _with_timeouts(plan, timeout_s)
        result = execute(plan, {f.path for f in self.files(task)})
        result.info["timing_protocol"] = (  # the verdict records which protocol its figures come from
            protocol_text(self.timing_protocol) if device == "npu" else "not timed (CPU twin debug)"
        )
        return result

    def runtime(self, built: BuildResult, task: Task, device: str) -> RuntimeSpec:
        """The Python runtime in the sandbox; the evaluation's directory is bound at the same path
        (the extension's rpath and the vendor dir point into it), read-only."""
        mode = "twin" if device == "cpu-twin" else "npu"
        artifact = built.artifacts["library" if mode == "twin" else "module"]
        plan = built.info.get("plan", {})
        workdir = plan.get("workdir", str(Path(artifact).parent))
        root = plan.get("base_env", {}).get("ASCEND_HOME_PATH") or str(availability.cann_home() or "")
        env = {
            **plan.get("base_env", {}),
            **plan.get("run_env", {}),
            **RUNTIME_LOG_ENV,
            "TORCH_DEVICE_BACKEND_AUTOLOAD": "1",
        }
        # T1: the worker's device slot (ASCEND_RT_VISIBLE_DEVICES) reaches this runtime through the
        # sandbox, which forwards a pinned process's selection variables to every child.
        if mode == "twin":
            env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # plain CPU torch: never load torch_npu
        binds = [(str(RUNTIME_DIR), BOX_RUNTIME), (str(WIRE_DIR), BOX_WIRE), (workdir, workdir)]
        module_dir = str(Path(artifact).parent)
        if not module_dir.startswith(workdir.rstrip("/") + "/"):  # the per-task extension cache
            binds.append((module_dir, module_dir))
        if root:
            binds.append((root, root))
        if mode == "npu":  # T3: the files the NPU runtime reads at start-up, as container recipes bind them
            binds += [(p, p) for p in availability.host_binds() if not p.startswith(root or "\0")]
        argv = [
            sys.executable,
            f"{BOX_RUNTIME}/ascendc_runtime.py",
            "--mode",
            mode,
            "--artifact",
            str(artifact),
            "--wire-dir",
            BOX_WIRE,
            "--attrs",
            json.dumps(runtime_attr_names(task) if is_benchmark_task(task)
                       else [a for a, _, _ in op_attrs(task) if not a.startswith("size_")]),
            "--lists",
            json.dumps(runtime_lists(task) if is_benchmark_task(task) else []),
            *(["--attr-layout", json.dumps(runtime_attr_layout(task))] if is_benchmark_task(task) else []),
            "--sizes",
            json.dumps(list(task.sizes)),
            "--dims",
            json.dumps([list(t.dims) for t in (*task.inputs, *task.outputs)]),
            "--protocol",
            self.timing_protocol,
        ]
        return RuntimeSpec(
            argv=argv,
            ro_binds=binds,
            env=env,
            python=True,
            device_nodes=availability.npu_device_nodes() if mode == "npu" else [],
            address_space_bytes=None if mode == "npu" else 8 << 30,
            reference_in_process=mode == "npu",
            name=f"ascendc-{'npu' if mode == 'npu' else 'cpu-twin'}",
            launch_sync_ms=LAUNCH_SYNC_MS["npu"],  # the event/wall check's allowance (seam.py: source)
        )

    def diagnose(
        self,
        candidate: Candidate,
        task: Task,
        probe: DiagnosticProbe,
        workdir: Path,
        *,
        device: str = "npu",
        sandbox_kind: str = "auto",
        timeout_s: float = 600.0,
        profile: bool | None = None,
    ) -> TargetDiagnostics:
        """printf / DumpTensor capture, mssanitizer and (profile) msprof op on the probe
        (diagnose.py); where CANN is missing, the static findings and the tiling plans."""
        from sagekernel.targets.ascendc import diagnose as diag
        from sagekernel.targets.ascendc import tiling_probe

        if profile is None:  # the optimiser's server sets it: msprof op on the board
            profile = os.environ.get("SAGE_ASCENDC_PROFILE", "") not in ("", "0")
        static = [f"[{f.rule}] {f.reason}" for f in self.lint(candidate, task)]
        tiling = candidate.files.get(f"op_host/{op_names(task).snake}_tiling_func.cpp", "")
        if tiling.strip() and contract_template(task, self.config) == "kernel-only":
            plans, why = tiling_probe.run_tiling(task, tiling)
            static += [
                f"tiling at {p.shape}: usedCoreNum={p.used}, formerNum={p.former_num} x {p.former_len}, "
                f"tail {p.tail_len} ({p.total} elements)"
                for p in plans or []
            ] or [f"tiling function not run: {why}"]
        if device == "npu" and not self.available("npu")[0] and self.available("cpu-twin")[0]:
            device = "cpu-twin"  # no board: the CPU twin still prints
        ok, why = self.available(device)
        if not ok:
            return diag.not_here(f"{device} is not available here: {why}", static)
        built = self.build(candidate, task, workdir / "build", device=device, sandbox_kind=sandbox_kind,
                           timeout_s=timeout_s)  # fmt: skip
        if not built.ok:
            return TargetDiagnostics(tools=["build"], sections=[DiagnosticSection("build", built.message)])
        mode = "twin" if device == "cpu-twin" else "npu"
        spec = self.runtime(built, task, device)
        probe_dir = workdir / "probe"
        diag.write_probe(probe, probe_dir)
        artifact = str(built.artifacts["library" if mode == "twin" else "module"])
        runs = diag.tool_runs(mode, diag.child_argv(mode, artifact, probe_dir), str(workdir), profile=profile)
        binds = [*spec.ro_binds, (str(diag.CHILD.parent), str(diag.CHILD.parent))]
        return diag.run_tools(
            runs, binds, spec.env, spec.device_nodes, probe_dir, workdir, sandbox_kind, timeout_s
        )

    def tolerances(self, task: Task) -> tuple[float, float] | None:
        """(atol, rtol) this target judges `task` by, where the task file declares NPU tolerances
        (SAGE_ASCENDC, settings.py); None: the task's own. The harness applies them to every
        comparison of the verdict (harness/tolerances.py); calibrate.py to the reference's."""
        s = task_settings(task)
        if s.atol is None and s.rtol is None:
            return None
        return (s.atol if s.atol is not None else task.atol, s.rtol if s.rtol is not None else task.rtol)


def _with_timeouts(plan: BuildPlan, timeout_s: float) -> BuildPlan:
    from dataclasses import replace

    return replace(plan, steps=tuple(replace(s, timeout_s=max(s.timeout_s, timeout_s)) for s in plan.steps))


__all__ = ["DEVICES", "AscendCTarget"]
