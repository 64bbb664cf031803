"""Rendering projects to disk and the build plans of the three paths (no toolchain needed)."""

from __future__ import annotations

import json

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
        "raw->SetDataSize(sizeof(t));",
    ):
        assert needle in host, needle


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
        assert (
            "aclnnAbsCustomGetWorkspaceSize(acl_x, acl_out, &workspaceSize, &executor)"
            in (tmp_path / "ext/abs_custom_aclnn.cpp").read_text()
        )
    if path == "direct":
        assert (
            "ACLRT_LAUNCH_KERNEL(abs_custom)(t.usedCoreNum, stream"
            in (tmp_path / "ext/abs_custom_direct.cpp").read_text()
        )
    if path == "twin":
        twin = (tmp_path / "project/twin/abs_custom_twin.cpp").read_text()
        assert "ICPU_RUN_KF(abs_custom, t.usedCoreNum" in twin and 'extern "C" int sage_twin_run(' in twin
        assert "RUN_MODE" in (tmp_path / "project/CMakeLists.txt").read_text()


def test_framework_plan_commands_and_private_install(tmp_path, tasks):
    cand = reference_candidate("softmax")
    plan = build_plan(cand, tasks["softmax"], tmp_path / "a", device="npu", config=AscendConfig())
    assert [s.name for s in plan.steps] == [
        "write-spec",
        "msopgen",
        "write-project",
        "presets",
        "build",
        "install",
        "extension",
    ]
    gen = step(plan, "msopgen")
    assert gen.argv[:3] == ("msopgen", "gen", "-i") and "ai_core-Ascend910B2" in gen.argv
    assert gen.argv[gen.argv.index("-out") + 1] == str((tmp_path / "a" / "project").resolve())
    for name in ("msopgen", "build", "install"):
        assert "ASCEND_CUSTOM_OPP_PATH" in step(plan, name).unset  # a stale value disturbs the build
    install = step(plan, "install")
    assert install.argv[-1] == f"--install-path={(tmp_path / 'a' / 'opp').resolve()}" and install.glob
    vendor = plan.artifacts["vendor"]
    assert vendor.startswith(str((tmp_path / "a").resolve())) and vendor.endswith(f"sage_{cand.digest}")
    assert plan.run_env["ASCEND_CUSTOM_OPP_PATH"] == vendor
    assert step(plan, "presets").detail["vendor_name"] == f"sage_{cand.digest}"
    other = build_plan(cand, tasks["softmax"], tmp_path / "b", device="npu", config=AscendConfig())
    assert not set(plan.artifacts.values()) & set(
        other.artifacts.values()
    )  # two workers never share a directory
    script = describe(plan)
    assert "env -u ASCEND_CUSTOM_OPP_PATH bash build.sh" in script and "msopgen gen -i" in script


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
