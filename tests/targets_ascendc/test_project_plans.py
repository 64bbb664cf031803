"""Rendering projects to disk and the build plans of the three paths (no toolchain needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagekernel.candidate import Candidate
from sagekernel.targets.ascendc.build import _edit_presets, execute
from sagekernel.targets.ascendc.config import AscendConfig
from sagekernel.targets.ascendc.plans import build_plan, describe
from sagekernel.targets.ascendc.project import write_files
from sagekernel.targets.ascendc.skeleton import kernel_only_host, op_attrs, op_json
from sagekernel.targets.ascendc.target import AscendCTarget

from .conftest import reference_candidate

KO = AscendConfig(template="kernel-only")


def step(plan, name):
    return next(s for s in plan.steps if s.name == name)


def test_op_json_matches_task(tasks):
    spec = json.loads(op_json(tasks["swish"]))[0]
    assert spec["op"] == "SwishCustom" and spec["language"] == "cpp"
    assert [d["name"] for d in spec["input_desc"]] == ["x"] and spec["input_desc"][0]["type"] == ["float"]
    assert [d["name"] for d in spec["output_desc"]] == ["out"]
    assert spec["attr"] == [
        {"name": "beta", "param_type": "optional", "type": "float", "default_value": "1.5"}
    ]


def test_sizes_without_an_input_become_attributes(tasks):
    # arange has no input tensor: its length must reach tiling and shape inference as an attribute
    attrs = [a for a, _, _ in op_attrs(tasks["arange"])]
    assert any(a.startswith("size_") for a in attrs)
    host = kernel_only_host(tasks["arange"], KO)
    assert "GetAttrPointer<int64_t>" in host and "SetDim(0," in host


def test_kernel_only_host_skeleton(tasks):
    host = kernel_only_host(tasks["swish"], KO)
    for needle in (
        "ComputeSwishCustomTiling(t, coreNum, ubBytes);",
        "t.B = context->GetInputShape(0)",
        "t.beta = *attrs->GetAttrPointer<float>(0);",
        "context->SetBlockDim(t.usedCoreNum);",
        'this->Attr("beta").AttrType(OPTIONAL).Float(1.5f);',
        "OP_ADD(SwishCustom);",
        'this->AICore().AddConfig("ascend910b");',
        "raw->SetDataSize(reg.GetDataSize());",
    ):
        assert needle in host, needle


def test_kernel_only_tiling_is_registered_with_the_framework(tasks):
    """Audit K1: the op compiler sizes the tiling buffer from the registered class; the plain struct
    must be registered, field for field in the same order, and the bytes saved through it."""
    import re

    from sagekernel.targets.ascendc.contract import kernel_only_fields

    for name in ("swish", "abs", "arange", "lerp"):
        host = kernel_only_host(tasks[name], KO)
        struct = re.search(r"BEGIN_TILING_DATA_DEF\((\w+)\)(.*?)END_TILING_DATA_DEF;", host, re.S)
        assert struct is not None, name
        op = struct.group(1).removesuffix("SageTiling")
        assert f"REGISTER_TILING_DATA_CLASS({op}, {struct.group(1)})" in host
        declared = re.findall(r"TILING_DATA_FIELD_DEF(?:_ARR)?\((\w+), (?:(\d+), )?(\w+)\)", struct.group(2))
        fields = kernel_only_fields(tasks[name])
        assert [(t, n) for t, _, n in declared] == [(f.ctype, f.name) for f in fields]
        assert [int(c) if c else None for _, c, _ in declared] == [f.count for f in fields]
        assert all(f"reg.set_{f.name}(t.{f.name});" in host for f in fields)
        assert "reg.GetDataSize() != sizeof(t)" in host and "reg.SaveToBuffer(raw->GetData()" in host


def test_kernel_side_tiling_header_is_self_contained(tasks):
    """Audit K2: SageCopyTiling uses GM_ADDR and __aicore__, so the header includes their source."""
    from sagekernel.targets.ascendc.skeleton import plain_tiling_header

    text = plain_tiling_header(tasks["abs"], kernel_side=True)
    assert text.index('#include "kernel_operator.h"') < text.index("GM_ADDR")
    assert "kernel_operator.h" not in plain_tiling_header(tasks["abs"], kernel_side=False)


def test_prototype_names_avoid_msopgen_locals():
    """Audit H8: a tensor or attribute named like a local of msOpGen's generated Python (scatter_add's
    `src`) is renamed in the prototype, and every file naming the prototype agrees."""
    from sagekernel.targets.ascendc.names import prototype_names
    from sagekernel.targets.ascendc.skeleton import prototype
    from sagekernel.tasks.suites import find_task

    assert prototype_names(["x", "src", "src_t", "result", "out"]) == [
        "x",
        "src_t2",
        "src_t",
        "result_t",
        "out",
    ]
    task = find_task("scatter_add")
    proto = prototype(task)
    assert "src" in [t.name for t in task.inputs] and "src" not in proto["Input"]
    spec = json.loads(op_json(task))[0]
    assert [d["name"] for d in spec["input_desc"]] == proto["Input"]
    from sagekernel.targets.ascendc.contract import contract_text

    assert '"src_t" for src' in contract_text(task, AscendConfig(template="full"))
    host = kernel_only_host(task, KO)
    assert 'this->Input("src_t")' in host and 'this->Input("src")' not in host


@pytest.mark.parametrize(
    ("device", "config", "path"),
    [
        ("npu", KO, "framework"),
        ("npu", AscendConfig(template="kernel-only", build_path="direct"), "direct"),
        ("cpu-twin", KO, "twin"),
    ],
)
def test_render_every_path_to_disk(tmp_path, tasks, device, config, path):
    cand = reference_candidate("abs")
    plan = build_plan(cand, tasks["abs"], tmp_path, device=device, config=config)
    assert plan.path == path and not plan.problems
    written = write_files(tmp_path, plan.files)
    assert {p.relative_to(tmp_path).as_posix() for p in written} == set(plan.files)
    assert (tmp_path / "project/op_kernel/abs_custom.cpp").read_text() == cand.files[
        "op_kernel/abs_custom.cpp"
    ]
    assert "SageCopyTiling" in (tmp_path / "project/op_kernel/abs_custom_tiling.h").read_text()
    if path == "framework":
        assert json.loads((tmp_path / "spec/abs_custom.json").read_text())[0]["op"] == "AbsCustom"
        aclnn = (tmp_path / "ext/abs_custom_aclnn.cpp").read_text()
        assert "aclnnAbsCustomGetWorkspaceSize(acl_x, acl_out, &workspaceSize, &executor)" in aclnn
        # H2: the second phase runs from the task queue; H3: failures carry aclGetRecentErrMsg()
        assert 'SageEnqueue("aclnnAbsCustom", [=](aclrtStream stream)' in aclnn
        assert "stream(false)" not in aclnn.split("void run(")[1]
        assert aclnn.count("aclGetRecentErrMsg()") == 2
    if path == "direct":
        direct = (tmp_path / "ext/abs_custom_direct.cpp").read_text()
        assert "launch(blocks, stream, x.data_ptr()" in direct
        # H2: the launch goes through torch_npu's task queue; H5: the tiling upload is cached
        assert direct.index('SageEnqueue("abs_custom"') < direct.index("ACLRT_LAUNCH_KERNEL(abs_custom)")
        assert "cmd.SetCustomHandler(call);" in direct and "TilingUploads().find(key)" in direct
        upload = direct.split("if (found == TilingUploads().end())")[1].split("at::Tensor tilingDevice")[0]
        assert "tilingHost.to(" in upload and direct.count("tilingHost.to(") == 1
    if path == "twin":
        twin = (tmp_path / "project/twin/abs_custom_twin.cpp").read_text()
        assert "ICPU_RUN_KF(abs_custom, t.usedCoreNum" in twin and 'extern "C" int sage_twin_run(' in twin
        assert "RUN_MODE" in (tmp_path / "project/CMakeLists.txt").read_text()


def test_framework_plan_commands_and_private_install(tmp_path, tasks, monkeypatch):
    monkeypatch.setenv("SAGE_ASCENDC_CACHE", str(tmp_path / "cache"))
    cand = reference_candidate("softmax")
    plan = build_plan(cand, tasks["softmax"], tmp_path / "a", device="npu", config=AscendConfig())
    assert [s.name for s in plan.steps] == [
        "write-spec",
        "msopgen",
        "skeleton",
        "write-project",
        "presets",
        "build",
        "install",
        "extension",
    ]
    gen = step(plan, "msopgen")
    assert Path(gen.argv[0]).name == "msopgen" and gen.argv[1:3] == ("gen", "-i")
    assert "ai_core-Ascend910B2" in gen.argv
    skeleton = step(plan, "skeleton").detail
    assert gen.creates == skeleton["cache"] and gen.argv[gen.argv.index("-out") + 1] == skeleton["fresh"]
    assert skeleton["project"] == str((tmp_path / "a" / "project").resolve())
    for name in ("msopgen", "build", "install"):
        assert "ASCEND_CUSTOM_OPP_PATH" in step(plan, name).unset  # a stale value disturbs the build
    install = step(plan, "install")
    assert install.argv[-1] == f"--install-path={(tmp_path / 'a' / 'opp').resolve()}" and install.glob
    vendor = plan.artifacts["vendor"]
    assert vendor.startswith(str((tmp_path / "a").resolve())) and vendor.endswith(f"sage_{cand.digest}")
    assert plan.run_env["ASCEND_CUSTOM_OPP_PATH"] == vendor
    assert plan.run_env["LD_LIBRARY_PATH"].startswith(f"{vendor}/op_api/lib:")
    assert step(plan, "presets").detail["vendor_name"] == f"sage_{cand.digest}"
    other = build_plan(cand, tasks["softmax"], tmp_path / "b", device="npu", config=AscendConfig())
    assert plan.artifacts["vendor"] != other.artifacts["vendor"]  # two workers never share an install
    script = describe(plan)
    assert "bash build.sh" in script and "msopgen gen -i" in script


def test_shared_products_are_built_once_per_task(tmp_path, tasks, monkeypatch):
    """H4 / item 7: the msOpGen skeleton and the aclnn extension depend on the task only, so two
    candidates of a task share them; another task gets its own."""
    monkeypatch.setenv("SAGE_ASCENDC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SAGE_ASCENDC_JOBS", "3")
    a = reference_candidate("softmax")
    b = Candidate({**a.files, "op_kernel/softmax_custom.cpp": a.files["op_kernel/softmax_custom.cpp"] + "\n"})
    pa = build_plan(a, tasks["softmax"], tmp_path / "a", device="npu", config=AscendConfig())
    pb = build_plan(b, tasks["softmax"], tmp_path / "b", device="npu", config=AscendConfig())
    assert a.digest != b.digest
    assert step(pa, "skeleton").detail["cache"] == step(pb, "skeleton").detail["cache"]
    spec_a, spec_b = json.loads(pa.files["ext/ext.json"]), json.loads(pb.files["ext/ext.json"])
    for key in ("build_directory", "sources", "include_paths", "ldflags", "cflags"):
        assert spec_a[key] == spec_b[key], key  # cpp_extension.load sees the same build: no rebuild
    assert pa.artifacts["module"] == pb.artifacts["module"]
    assert not any("rpath" in flag for flag in spec_a["ldflags"])  # the run env picks the candidate's lib
    assert [src for src, _ in spec_a["copy"]] != [src for src, _ in spec_b["copy"]]
    swish = build_plan(reference_candidate("abs"), tasks["abs"], tmp_path / "c", device="npu", config=KO)
    assert swish.artifacts["module"] != pa.artifacts["module"]
    assert (
        step(pa, "build").env["CMAKE_BUILD_PARALLEL_LEVEL"] == "3"
        and step(pa, "extension").env["MAX_JOBS"] == "3"
    )


def test_msopgen_resolved_like_the_probe(tmp_path, tasks, monkeypatch):
    """H1: with msopgen only in the toolkit's python/site-packages/bin (not on PATH), the plan calls
    it by that absolute path, the same place the availability probe accepts."""
    home = tmp_path / "cann"
    tool = home / "python" / "site-packages" / "bin" / "msopgen"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("ASCEND_HOME_PATH", str(home))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    plan = build_plan(
        reference_candidate("softmax"), tasks["softmax"], tmp_path / "a", device="npu", config=AscendConfig()
    )
    assert step(plan, "msopgen").argv[0] == str(tool)


def test_paths_that_need_the_kernel_only_template(tmp_path, tasks):
    cand = reference_candidate("softmax")
    for device, cfg in (("npu", AscendConfig(build_path="direct")), ("cpu-twin", AscendConfig())):
        plan = build_plan(cand, tasks["softmax"], tmp_path, device=device, config=cfg)
        assert plan.problems and "kernel-only" in plan.problems[0]
        result = execute(plan, set())
        assert not result.ok and "kernel-only" in result.message


def test_build_without_cann_is_not_available_but_renders(tmp_path, tasks, monkeypatch):
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    target = AscendCTarget(KO)
    result = target.build(
        reference_candidate("abs"), tasks["abs"], tmp_path, device="npu", sandbox_kind="auto", timeout_s=60
    )
    assert not result.ok and result.stage == "compile"
    assert result.message.startswith("not available here: CANN toolkit not found")
    assert (tmp_path / "project/op_kernel/abs_custom.cpp").is_file()
    assert result.info["plan"]["path"] == "framework"


def test_candidate_cannot_smuggle_build_files(tmp_path, tasks):
    cand = Candidate({**reference_candidate("abs").files, "CMakeLists.txt": "evil", "../escape.cpp": "x"})
    plan = build_plan(cand, tasks["abs"], tmp_path, device="npu", config=KO)
    assert not any("escape" in f or f.endswith("project/CMakeLists.txt") for f in plan.files)
    with pytest.raises(ValueError):
        write_files(tmp_path, {"../outside.txt": "x"})


def test_presets_edit(tmp_path):
    presets = {
        "version": 1,
        "configurePresets": [
            {
                "name": "default",
                "cacheVariables": {
                    "ASCEND_CANN_PACKAGE_PATH": {"type": "PATH", "value": "/usr/local/Ascend/latest"},
                    "vendor_name": {"type": "STRING", "value": "customize"},
                    "ASCEND_COMPUTE_UNIT": {"type": "STRING", "value": "ascend310p"},
                },
            }
        ],
    }
    (tmp_path / "CMakePresets.json").write_text(json.dumps(presets))
    _edit_presets(
        tmp_path,
        {
            "file": "CMakePresets.json",
            "ASCEND_CANN_PACKAGE_PATH": "/opt/cann",
            "vendor_name": "sage_x",
            "ASCEND_COMPUTE_UNIT": "ascend910b",
            "ENABLE_BINARY_PACKAGE": "True",
        },
    )
    cache = json.loads((tmp_path / "CMakePresets.json").read_text())["configurePresets"][0]["cacheVariables"]
    assert cache["ASCEND_CANN_PACKAGE_PATH"] == {"type": "PATH", "value": "/opt/cann"}
    assert cache["vendor_name"]["value"] == "sage_x" and cache["ASCEND_COMPUTE_UNIT"]["value"] == "ascend910b"
    assert cache["ENABLE_BINARY_PACKAGE"]["value"] == "True"


def test_runtime_spec(tmp_path, tasks):
    from sagekernel.targets.base import BuildResult

    target = AscendCTarget(KO)
    plan = target.plan(reference_candidate("abs"), tasks["abs"], tmp_path)
    built = BuildResult(
        True, "built", {"module": tmp_path / "ext/build/sage_abs_custom.so"}, {"plan": plan.to_dict()}
    )
    spec = target.runtime(built, tasks["abs"], "npu")
    assert spec.reference_in_process and spec.python and spec.address_space_bytes is None
    assert spec.env["ASCEND_CUSTOM_OPP_PATH"] == plan.artifacts["vendor"]
    assert "--mode" in spec.argv and spec.argv[spec.argv.index("--mode") + 1] == "npu"
    assert any(dst == "/box/wire" for _, dst in spec.ro_binds)
    twin = target.runtime(
        BuildResult(True, "built", {"library": tmp_path / "libsage_kernels.so"}, {"plan": plan.to_dict()}),
        tasks["abs"],
        "cpu-twin",
    )
    assert (
        not twin.reference_in_process
        and twin.device_nodes == []
        and twin.env["TORCH_DEVICE_BACKEND_AUTOLOAD"] == "0"
    )


def test_runtime_carries_device_slot_logs_and_host_files(tmp_path, tasks, monkeypatch):
    """T1: the worker's ASCEND_RT_VISIBLE_DEVICES reaches the sandboxed runtime (the sandbox rebuilds
    the environment and forwards the pin: tests/test_device_pinning.py for every device target);
    H3: CANN's log goes to stderr; T3: the NPU host files present are bound; the timing protocol is
    named on the command line."""
    from sagekernel import sandbox
    from sagekernel.seam import LAUNCH_SYNC_MS
    from sagekernel.targets.ascendc import availability
    from sagekernel.targets.base import BuildResult

    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "3")
    monkeypatch.setenv("SAGE_ASCENDC_CACHE", str(tmp_path / "cache"))
    info = tmp_path / "ascend_install.info"
    info.write_text("Driver_Install_Path_Param=/usr/local/Ascend\n")
    monkeypatch.setattr(availability, "NPU_HOST_FILES", (str(info), str(tmp_path / "absent")))
    target = AscendCTarget(KO)
    plan = target.plan(reference_candidate("abs"), tasks["abs"], tmp_path / "wd")
    built = BuildResult(True, "built", {"module": Path(plan.artifacts["module"])}, {"plan": plan.to_dict()})
    spec = target.runtime(built, tasks["abs"], "npu")
    cmd = sandbox.SandboxCommand(argv=spec.argv, ro_binds=spec.ro_binds, env=spec.env,
                                 device_nodes=spec.device_nodes)
    argv, _, _ = sandbox.command_line(cmd, kind="bwrap", limits=sandbox.Limits(), result_fd=9,
                                      scratch_dir=tmp_path)
    assert ["--setenv", "ASCEND_RT_VISIBLE_DEVICES", "3"] in [argv[i : i + 3] for i in range(len(argv))]
    assert spec.env["ASCEND_SLOG_PRINT_TO_STDOUT"] == "1" and spec.env["ASCEND_GLOBAL_LOG_LEVEL"] == "3"
    assert spec.launch_sync_ms == LAUNCH_SYNC_MS["npu"]  # the event/wall check's NPU allowance
    assert (str(info), str(info)) in spec.ro_binds and all("absent" not in s for s, _ in spec.ro_binds)
    module_dir = str(Path(plan.artifacts["module"]).parent)
    assert (module_dir, module_dir) in spec.ro_binds  # the per-task extension lives outside the workdir
    assert spec.argv[spec.argv.index("--protocol") + 1] == "batched"
    cold = AscendCTarget(KO, timing_protocol="cold-l2").runtime(built, tasks["abs"], "npu")
    assert cold.argv[cold.argv.index("--protocol") + 1] == "cold-l2"
    monkeypatch.setenv("SAGE_ASCENDC_TIMING", "fastest")
    with pytest.raises(ValueError):
        AscendCTarget(KO).runtime(built, tasks["abs"], "npu")


def test_build_records_the_timing_protocol(tmp_path, tasks):
    """T2: the verdict's build info (verdict.build) names the protocol its figures come from, even
    when the build cannot run here."""
    result = AscendCTarget(KO).build(
        reference_candidate("abs"), tasks["abs"], tmp_path, device="npu", sandbox_kind="none", timeout_s=0
    )
    assert not result.ok and "batched (paper C.4)" in result.info["timing_protocol"]
    assert "100 back-to-back calls" in result.info["timing_protocol"]
