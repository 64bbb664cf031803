"""Names, file sets and contract text derived from the task; the target's registration."""

from __future__ import annotations

import pytest

from sagekernel.protocols import Target
from sagekernel.targets import get_target, target_names
from sagekernel.targets.ascendc.config import AscendConfig
from sagekernel.targets.ascendc.contract import contract_text, files_for, kernel_only_fields, kernel_signature
from sagekernel.targets.ascendc.names import camel_from_snake, op_names, snake_from_camel
from sagekernel.targets.ascendc.target import AscendCTarget
from sagekernel.targets.base import Evidence


@pytest.mark.parametrize(
    ("task", "op", "snake"),
    [
        ("abs", "AbsCustom", "abs_custom"),
        ("mul_sigmoid", "MulSigmoidCustom", "mul_sigmoid_custom"),
        ("rms_norm", "RmsNormCustom", "rms_norm_custom"),
        ("softmax", "SoftmaxCustom", "softmax_custom"),
    ],
)
def test_names_agree(tasks, task, op, snake):
    n = op_names(tasks[task])
    assert (n.op_type, n.snake, n.kernel_entry) == (op, snake, snake)
    assert n.aclnn == f"aclnn{op}" and n.aclnn_header == f"aclnn_{snake}.h"
    assert n.tiling_struct == f"{op}TilingData"
    assert snake_from_camel(op) == snake


def test_msopgen_style_snake_case():
    assert snake_from_camel("AddCustom") == "add_custom"
    assert snake_from_camel("CastF32F16SatCustom") == "cast_f32_f16_sat_custom"
    assert snake_from_camel("GELUCustom") == "gelu_custom"
    assert camel_from_snake("cast_f32_f16_sat") == "CastF32F16Sat"


def test_full_template_files_and_contract(tasks):
    task, cfg = tasks["swish"], AscendConfig(template="full")
    paths = [f.path for f in files_for(task, cfg)]
    assert paths == [
        "op_host/swish_custom_tiling.h",
        "op_host/swish_custom.cpp",
        "op_kernel/swish_custom.cpp",
    ]
    text = contract_text(task, cfg)
    for needle in (
        *paths,
        "SwishCustomTilingData",
        "REGISTER_TILING_DATA_CLASS(SwishCustom, SwishCustomTilingData)",
        "OP_ADD(SwishCustom)",
        "aclnnSwishCustom",
        kernel_signature(task),
        "AscendC::Sigmoid",
        "attribute `beta`",
        'AddConfig("ascend910b")',
    ):
        assert needle in text, needle
    assert kernel_signature(task) == (
        'extern "C" __global__ __aicore__ void swish_custom(GM_ADDR x, GM_ADDR out, '
        "GM_ADDR workspace, GM_ADDR tiling)"
    )


def test_kernel_only_files_and_fixed_struct(tasks):
    task, cfg = tasks["swish"], AscendConfig(template="kernel-only")
    assert [f.path for f in files_for(task, cfg)] == [
        "op_host/swish_custom_tiling_func.cpp",
        "op_kernel/swish_custom.cpp",
    ]
    fields = {f.name: f.ctype for f in kernel_only_fields(task)}
    assert fields["B"] == fields["D"] == "int64_t" and fields["beta"] == "float"
    assert fields["usedCoreNum"] == "uint32_t" and "extra" in fields
    text = contract_text(task, cfg)
    assert (
        "void ComputeSwishCustomTiling(SwishCustomTilingData& t, uint32_t coreNum, uint64_t ubBytes);" in text
    )
    assert "struct SwishCustomTilingData {" in text and "SageCopyTiling(&t, tiling)" in text


def test_task_setting_overrides_template(tmp_path, tasks):
    from dataclasses import replace

    src = tasks["abs"].source_path.read_text() + '\nSAGE_ASCENDC = {"template": "kernel-only"}\n'
    path = tmp_path / "abs.py"
    path.write_text(src)
    task = replace(tasks["abs"], source_path=path)
    assert len(files_for(task, AscendConfig(template="full"))) == 2


def test_cube_work_gets_the_full_template(tmp_path):
    """H7: the kernel-only skeleton launches vector kernels only (no TCubeTiling, block count capped
    at the AIV cores), so a task whose reference multiplies matrices gets the full template under a
    kernel-only configuration -- the three built-in cube tasks and any task file written that way --
    unless its own file names a template. Vector tasks keep the configured one."""
    from dataclasses import replace

    from sagekernel.targets.ascendc.contract import template_of
    from sagekernel.tasks.suites import find_task

    ko = AscendConfig(template="kernel-only")
    for name in ("grouped_matmul", "matmul_bias_gelu", "attention"):
        task = find_task(name)
        assert template_of(task, ko) == "full" and len(files_for(task, ko)) == 3, name
    swish = find_task("swish")
    assert template_of(swish, ko) == "kernel-only"
    body = swish.source_path.read_text()
    forward = "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"

    def variant(name: str, text: str):
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        return replace(swish, source_path=path)

    assert forward in body, "the swish task's Model.forward changed; update this test"
    written = {
        "at": body.replace(forward, forward + "        x = x @ x.transpose(-1, -2) @ x\n"),
        "linear": body.replace(forward, forward + "        x = torch.nn.functional.linear(x, x)\n"),
        "method": body.replace(forward, forward + "        x = x.bmm(x)\n"),
    }
    for name, text in written.items():
        assert template_of(variant(name, text), ko) == "full", name
    inputs_only = body + "\n\ndef weights():\n    return torch.matmul(torch.ones(2, 2), torch.ones(2, 2))\n"
    assert template_of(variant("inputs_only", inputs_only), ko) == "kernel-only"  # not the Model's work
    own = written["at"] + '\nSAGE_ASCENDC = {"template": "kernel-only"}\n'
    assert template_of(variant("own", own), ko) == "kernel-only"  # the task file decides
    text = contract_text(swish, ko)
    assert "vector (AIV) core count" in text
    assert "Cube work (Matmul and its TCubeTiling) needs the full template" in text


def test_registered_and_protocol():
    assert "ascendc" in target_names()
    target = get_target("ascendc")
    assert isinstance(target, AscendCTarget) and isinstance(target, Target)
    devices = {d.name: d for d in target.devices()}
    assert devices["npu"].evidence is Evidence.HARDWARE and devices["npu"].timed
    assert devices["cpu-twin"].evidence is Evidence.EMULATED and not devices["cpu-twin"].timed


def test_soc_families_cover_real_boxes():
    """Audit H6: the variants real 910B / 910C boxes report configure (family rule, as CANN's op
    build maps them), in any spelling npu-smi or torch_npu prints."""
    from sagekernel.targets.ascendc.config import KNOWN_SOCS, canonical_soc, soc_family

    for soc in KNOWN_SOCS:
        config = AscendConfig(soc=soc)
        assert config.compute_unit == f"ai_core-{soc}"
    assert AscendConfig(soc="Ascend910B2C").add_config == "ascend910b"
    assert AscendConfig(soc="Ascend910_9392").add_config == "ascend910_93"
    assert AscendConfig(soc="Ascend910B4-1").npu_arch == "dav-2201"
    assert soc_family("910b2c") == ("ascend910b", "dav-2201") and canonical_soc("910b2c") == "Ascend910B2C"
    got = AscendConfig.from_env({"SAGE_ASCENDC_SOC": "ascend910_9382"})
    assert (got.soc, got.soc_source) == ("Ascend910_9382", "env")
    assert AscendConfig.from_env({}, detect=False).soc_source == "default"
    for bad in ("Ascend910B5", "Ascend910_9491", "Ascend950"):
        assert soc_family(bad) is None


def test_bool_travels_as_uint8_in_the_kernel(tasks):
    """Audit K3: DataCopy has no bool on A2/A3; the prototype keeps DT_BOOL, the kernel sees bytes."""
    from sagekernel.targets.ascendc.contract import DTYPES
    from sagekernel.tasks.suites import find_task

    assert DTYPES["bool"] == ("bool", "ge::DT_BOOL", "uint8_t")
    text = contract_text(find_task("isinf"), AscendConfig())
    assert "uint8_t in the kernel" in text and "never bool" in text


def test_config_from_env_rejects_unknown_values():
    assert AscendConfig.from_env({"SAGE_ASCENDC_BUILD": "direct"}).build_path == "direct"
    for env in (
        {"SAGE_ASCENDC_TEMPLATE": "half"},
        {"SAGE_ASCENDC_BUILD": "x"},
        {"SAGE_ASCENDC_SOC": "Ascend999"},
    ):
        with pytest.raises(ValueError):
            AscendConfig.from_env(env)
