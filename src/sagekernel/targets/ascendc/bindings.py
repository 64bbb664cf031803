"""The Python-callable side of a built operator: one torch extension `sage_<op>` with `run(...)`.

`run(inputs..., outputs..., attrs...)` writes into the output tensors the runtime allocated
(so the harness's sentinel fill and guard bytes stay the runtime's), on every build path:

- framework: the two-phase aclnn API msOpGen generated (`aclnn<Op>GetWorkspaceSize`, `aclnn<Op>`);
- direct: the model's tiling computation on the host, then `ACLRT_LAUNCH_KERNEL(<op>)`;
- twin (CANN CPU twin debug): no torch extension; a C entry `sage_twin_run` in the host-built
  kernel library (ctypes), the same tiling, then `ICPU_RUN_KF` on `GmAlloc` buffers.

Assumption from the CANN docs (not checked here, no toolkit): generated aclnn signatures take
inputs, then attributes (Float -> double, Int -> int64_t), then outputs, then the workspace size
pointer and the executor.
"""

from __future__ import annotations

from sagekernel.targets.ascendc.contract import kernel_only_fields
from sagekernel.targets.ascendc.names import op_names
from sagekernel.targets.ascendc.skeleton import op_attrs, size_sources
from sagekernel.tasks.task import Task


def _params(task: Task, *, const_inputs: bool = True) -> list[str]:
    cin = "const at::Tensor&" if const_inputs else "at::Tensor&"
    params = [f"{cin} {t.name}" for t in task.inputs] + [f"at::Tensor& {t.name}" for t in task.outputs]
    params += [f"{'double' if kind == 'float' else 'int64_t'} {a}" for a, kind, _ in op_attrs(task)]
    return params


def _run_params(task: Task) -> str:
    """run()'s parameters: tensors and the task's attributes; size attributes come from the shapes."""
    return ", ".join(p for p in _params(task) if not p.split()[-1].startswith("size_"))


def _size_locals(task: Task) -> list[str]:
    """Sizes no input carries are read from an output's shape (they are op attributes, size_<S>)."""
    lines = []
    for s, src in size_sources(task).items():
        if src is not None:
            continue
        holder = next((t for t in task.outputs if s in t.dims), None)
        value = f"{holder.name}.size({holder.dims.index(s)})" if holder else "0"
        lines.append(f"    int64_t size_{s} = {value};")
    return lines


def _fill_tiling(task: Task) -> list[str]:
    """Host code that fills the kernel-only struct `t` from the tensors and attributes."""
    n = op_names(task)
    lines = [f"    {n.tiling_struct} t{{}};"]
    for s, src in size_sources(task).items():
        lines.append(
            f"    t.{s} = {task.inputs[src[0]].name}.size({src[1]});" if src else f"    t.{s} = size_{s};"
        )
    field_names = {f.name for f in kernel_only_fields(task)}
    for a, kind, _ in op_attrs(task):
        if a in field_names:
            lines.append(f"    t.{a} = static_cast<{'float' if kind == 'float' else 'int64_t'}>({a});")
    dims = task.outputs[0].dims
    lines.append(f"    t.totalLength = {' * '.join(f't.{d}' for d in dims) or '1'};")
    return lines


_CHECK = """#define SAGE_CHECK(expr) do { auto _rc = (expr); if (_rc != 0) { \\
    const char* _detail = aclGetRecentErrMsg(); \\
    throw std::runtime_error(std::string(#expr) + " failed with " \\
                             + std::to_string(static_cast<int>(_rc)) + "; detail: " \\
                             + (_detail ? _detail : "(none)")); } \\
} while (0)"""

#: How a launch reaches the stream (audit H2): through torch_npu's task queue, as op-plugin's
#: EXEC_NPU_CMD does (OpCommand + SetCustomHandler), so it is ordered with the queue-recorded
#: timing events and with the torch reference, which goes through the same queue. A launch made
#: straight on `stream(false)` from the Python thread can overtake the queued start event.
_QUEUE_HELPER = """// Runs `launch` from torch_npu's task queue (in order with queued events and torch
// ops); an error status is reported with CANN's own detail.
template <typename Launch>
static void SageEnqueue(const char* name, Launch launch)
{
    auto call = [name, launch]() -> int {
        int rc = launch(c10_npu::getCurrentNPUStream().stream(false));
        if (rc != 0) {
            const char* detail = aclGetRecentErrMsg();
            fprintf(stderr, "[SAGE] %s failed with %d; detail: %s\\n", name, rc, detail ? detail : "(none)");
        }
        return rc;
    };
    at_npu::native::OpCommand cmd;
    cmd.Name(name);
    cmd.SetCustomHandler(call);
    cmd.Run();
}"""


def aclnn_prelude(task: Task) -> list[str]:
    """The framework binding's includes and helpers (SAGE_CHECK, SageEnqueue, AclTensorOf)."""
    n = op_names(task)
    return [
            "// Rendered by SAGE (framework path): calls the installed custom op through aclnn.",
            "#include <stdexcept>",
            "#include <string>",
            "#include <vector>",
            "#include <torch/extension.h>",
            "#include <cstdio>",
            '#include "torch_npu/csrc/core/npu/NPUStream.h"',
            '#include "torch_npu/csrc/framework/OpCommand.h"',
            '#include "acl/acl.h"',
            f'#include "{n.aclnn_header}"',
            "",
            _CHECK,
            "",
            _QUEUE_HELPER,
            "",
            "static aclDataType AclTypeOf(const at::Tensor& t)",
            "{",
            "    switch (t.scalar_type()) {",
            "    case at::kFloat: return ACL_FLOAT;",
            "    case at::kHalf: return ACL_FLOAT16;",
            "    case at::kBFloat16: return ACL_BF16;",
            "    case at::kDouble: return ACL_DOUBLE;",
            "    case at::kLong: return ACL_INT64;",
            "    case at::kInt: return ACL_INT32;",
            "    case at::kShort: return ACL_INT16;",
            "    case at::kChar: return ACL_INT8;",
            "    case at::kByte: return ACL_UINT8;",
            "    case at::kBool: return ACL_BOOL;",
            '    default: throw std::runtime_error("unsupported dtype");',
            "    }",
            "}",
            "",
            "static aclTensor* AclTensorOf(const at::Tensor& t)",
            "{",
            "    std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());",
            "    std::vector<int64_t> strides(t.strides().begin(), t.strides().end());",
            "    return aclCreateTensor(shape.data(), shape.size(), AclTypeOf(t), strides.data(), 0,",
            "                           ACL_FORMAT_ND,",
            "                           shape.data(), shape.size(), t.data_ptr());",
            "}",
    ]


def framework_binding(task: Task) -> str:
    """SAGE's own operators (an NPUKernelBench operator's: benchmark_cpp.aclnn_binding)."""
    n = op_names(task)
    tensors = [t.name for t in task.inputs] + [t.name for t in task.outputs]
    args = (
        [f"acl_{t.name}" for t in task.inputs]
        + [a for a, _, _ in op_attrs(task)]
        + [f"acl_{t.name}" for t in task.outputs]
    )
    return "\n".join(
        [
            *aclnn_prelude(task),
            "",
            f"void run({_run_params(task)})",
            "{",
            *_size_locals(task),
            *[f"    aclTensor* acl_{t} = AclTensorOf({t});" for t in tensors],
            "    uint64_t workspaceSize = 0;",
            "    aclOpExecutor* executor = nullptr;",
            f"    SAGE_CHECK({n.aclnn}GetWorkspaceSize({', '.join(args)}, &workspaceSize, &executor));",
            "    at::Tensor workspace = at::empty({static_cast<int64_t>(workspaceSize ? workspaceSize : 1)},",
            f"                                     {tensors[-1]}.options().dtype(at::kByte));",
            "    void* workspacePtr = workspaceSize ? workspace.data_ptr() : nullptr;",
            "    // The workspace tensor and the aclTensors live until the queued call has run.",
            f"    std::vector<aclTensor*> owned{{{', '.join(f'acl_{t}' for t in tensors)}}};",
            f'    SageEnqueue("{n.aclnn}", [=](aclrtStream stream) -> int {{',
            "        (void)workspace;",
            f"        int rc = {n.aclnn}(workspacePtr, workspaceSize, executor, stream);",
            "        for (aclTensor* t : owned) {",
            "            aclDestroyTensor(t);",
            "        }",
            "        return rc;",
            "    });",
            "}",
            "",
            'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }',
            "",
        ]
    )


def direct_binding(task: Task) -> str:
    n = op_names(task)
    ptrs = ", ".join(
        [f"{t.name}.data_ptr()" for t in (*task.inputs, *task.outputs)]
        + ["workspace.data_ptr()", "tilingDevice.data_ptr()"]
    )
    dev = (task.inputs or task.outputs)[0].name
    return "\n".join(
        [
            "// Rendered by SAGE (direct-launch path): host tiling, then ACLRT_LAUNCH_KERNEL.",
            "#include <cstring>",
            "#include <stdexcept>",
            "#include <string>",
            "#include <torch/extension.h>",
            "#include <cstdio>",
            "#include <map>",
            '#include "torch_npu/csrc/core/npu/NPUStream.h"',
            '#include "torch_npu/csrc/framework/OpCommand.h"',
            '#include "acl/acl.h"',
            '#include "tiling/platform/platform_ascendc.h"',
            f'#include "{n.launch_header}"',
            f'#include "{n.snake}_tiling.h"',
            "",
            _CHECK,
            "",
            _QUEUE_HELPER,
            "",
            "// Tiling bytes -> their device copy (audit H5): uploaded once per distinct tiling, in the",
            "// warm-up calls, so the timed calls launch with no host-to-device copy and no allocation.",
            "static std::map<std::string, at::Tensor>& TilingUploads()",
            "{",
            "    static std::map<std::string, at::Tensor> uploads;",
            "    return uploads;",
            "}",
            f"void Compute{n.op_type}Tiling({n.tiling_struct}& t, uint32_t coreNum, uint64_t ubBytes);",
            "",
            f"void run({_run_params(task)})",
            "{",
            *_size_locals(task),
            *_fill_tiling(task),
            "    auto* platform = platform_ascendc::PlatformAscendCManager::GetInstance();",
            "    uint32_t coreNum = platform->GetCoreNumAiv();",
            "    uint64_t ubBytes = 0;",
            "    platform->GetCoreMemSize(platform_ascendc::CoreMemType::UB, ubBytes);",
            f"    Compute{n.op_type}Tiling(t, coreNum, ubBytes);",
            "    if (t.usedCoreNum < 1 || t.usedCoreNum > coreNum) {",
            '        throw std::runtime_error("tiling chose usedCoreNum=" + std::to_string(t.usedCoreNum));',
            "    }",
            "    std::string key(reinterpret_cast<const char*>(&t), sizeof(t));",
            "    auto found = TilingUploads().find(key);",
            "    if (found == TilingUploads().end()) {",
            "        at::Tensor tilingHost = at::empty({static_cast<int64_t>(sizeof(t))}, at::kByte);",
            "        std::memcpy(tilingHost.data_ptr(), &t, sizeof(t));",
            f"        found = TilingUploads().emplace(key, tilingHost.to({dev}.device())).first;",
            "    }",
            "    at::Tensor tilingDevice = found->second;",
            "    static at::Tensor workspace;",
            "    int64_t workspaceBytes = static_cast<int64_t>(platform->GetLibApiWorkSpaceSize()) + 32;",
            "    if (!workspace.defined() || workspace.numel() < workspaceBytes) {",
            f"        workspace = at::empty({{workspaceBytes}}, {dev}.options().dtype(at::kByte));",
            "    }",
            "    uint32_t blocks = t.usedCoreNum;",
            f'    SageEnqueue("{n.kernel_entry}", [=](aclrtStream stream) -> int {{',
            f"        auto launch = ACLRT_LAUNCH_KERNEL({n.kernel_entry});",
            f"        return static_cast<int>(launch(blocks, stream, {ptrs}));",
            "    });",
            "}",
            "",
            'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }',
            "",
        ]
    )


def twin_driver(task: Task) -> str:
    """CPU twin debug: a C entry `sage_twin_run` in the host-compiled kernel library (no torch), so
    the runtime calls it through ctypes: it fills the tiling from the sizes and attributes, runs
    the model's tiling computation, then `ICPU_RUN_KF` on `GmAlloc` buffers. Functional only."""
    n = op_names(task)
    tensors = [*task.inputs, *task.outputs]
    params = ", ".join(["GM_ADDR " + t.name for t in tensors] + ["GM_ADDR workspace", "GM_ADDR tiling"])
    field_names = {f.name for f in kernel_only_fields(task)}
    plain_attrs = [(a, kind) for a, kind, _ in op_attrs(task) if not a.startswith("size_")]
    lines = [
        "// Rendered by SAGE (CANN CPU twin debug); functional only, never timed.",
        "#include <cstdint>",
        "#include <cstring>",
        '#include "tikicpulib.h"',
        f'#include "{n.snake}_tiling.h"',
        "",
        f'extern "C" __global__ __aicore__ void {n.kernel_entry}({params});',
        f"void Compute{n.op_type}Tiling({n.tiling_struct}& t, uint32_t coreNum, uint64_t ubBytes);",
        "",
        "static constexpr uint32_t kTwinCores = 48;  // 910B AIV count; the twin emulates each core",
        "static constexpr uint64_t kTwinUbBytes = 192 * 1024;",
        "",
        "// buffers/nbytes: inputs then outputs; sizes: the task's size symbols in order;",
        "// attrs: its attributes in order.",
        'extern "C" int sage_twin_run(uint8_t* const* buffers, const uint64_t* nbytes, const int64_t* sizes,',
        "                             const double* attrs)",
        "{",
        f"    {n.tiling_struct} t{{}};",
    ]
    lines += [f"    t.{s} = sizes[{i}];" for i, s in enumerate(task.sizes)]
    lines += [
        f"    t.{a} = static_cast<{'float' if kind == 'float' else 'int64_t'}>(attrs[{i}]);"
        for i, (a, kind) in enumerate(plain_attrs)
        if a in field_names
    ]
    dims = task.outputs[0].dims
    lines += [
        f"    t.totalLength = {' * '.join(f't.{d}' for d in dims) or '1'};",
        f"    Compute{n.op_type}Tiling(t, kTwinCores, kTwinUbBytes);",
        "    if (t.usedCoreNum < 1 || t.usedCoreNum > kTwinCores) {",
        "        return 2;",
        "    }",
    ]
    for i, t in enumerate(tensors):
        lines.append(f"    uint8_t* gm_{t.name} = static_cast<uint8_t*>(AscendC::GmAlloc(nbytes[{i}] + 32));")
    lines += [f"    std::memcpy(gm_{t.name}, buffers[{i}], nbytes[{i}]);" for i, t in enumerate(task.inputs)]
    lines += [
        "    uint8_t* gm_workspace = static_cast<uint8_t*>(AscendC::GmAlloc(16 * 1024 * 1024));",
        "    uint8_t* gm_tiling = static_cast<uint8_t*>(AscendC::GmAlloc(sizeof(t)));",
        "    std::memcpy(gm_tiling, &t, sizeof(t));",
        "    AscendC::SetKernelMode(KernelMode::AIV_MODE);",
        f"    ICPU_RUN_KF({n.kernel_entry}, t.usedCoreNum, "
        + ", ".join([f"gm_{t.name}" for t in tensors] + ["gm_workspace", "gm_tiling"])
        + ");",
    ]
    k0 = len(task.inputs)
    lines += [
        f"    std::memcpy(buffers[{k0 + i}], gm_{t.name}, nbytes[{k0 + i}]);"
        for i, t in enumerate(task.outputs)
    ]
    lines += [f"    AscendC::GmFree(gm_{t.name});" for t in tensors]
    lines += [
        "    AscendC::GmFree(gm_workspace);",
        "    AscendC::GmFree(gm_tiling);",
        "    return 0;",
        "}",
        "",
    ]
    return "\n".join(lines)


def kernel_cmake(task: Task) -> str:
    """CMakeLists.txt of the direct-launch and CPU-twin kernel library (RUN_MODE npu | cpu)."""
    n = op_names(task)
    return f"""cmake_minimum_required(VERSION 3.16)
project(sage_{n.snake} LANGUAGES CXX)
# Rendered by SAGE. RUN_MODE=npu: bisheng through the toolkit's ascendc_kernel_cmake;
# RUN_MODE=cpu: the CANN CPU twin-debug library (tikicpulib), functional only.
set(SOC_VERSION "Ascend910B2" CACHE STRING "SoC to build for")
set(ASCEND_CANN_PACKAGE_PATH "$ENV{{ASCEND_HOME_PATH}}" CACHE PATH "CANN toolkit root")
set(RUN_MODE "npu" CACHE STRING "npu or cpu")
set(KERNEL_FILES ${{CMAKE_CURRENT_SOURCE_DIR}}/op_kernel/{n.snake}.cpp)
if(RUN_MODE STREQUAL "npu")
    # the module moved between CANN releases: look in every documented place
    foreach(dir tools/tikcpp/ascendc_kernel_cmake compiler/tikcpp/ascendc_kernel_cmake
            ascendc_devkit/tikcpp/samples/cmake)
        if(NOT ASCENDC_CMAKE_DIR AND EXISTS ${{ASCEND_CANN_PACKAGE_PATH}}/${{dir}}/ascendc.cmake)
            set(ASCENDC_CMAKE_DIR ${{ASCEND_CANN_PACKAGE_PATH}}/${{dir}})
        endif()
    endforeach()
    if(NOT ASCENDC_CMAKE_DIR)
        message(FATAL_ERROR "ascendc_kernel_cmake not found under ${{ASCEND_CANN_PACKAGE_PATH}}")
    endif()
    include(${{ASCENDC_CMAKE_DIR}}/ascendc.cmake)
    ascendc_library(sage_kernels SHARED ${{KERNEL_FILES}})
else()
    list(APPEND CMAKE_PREFIX_PATH ${{ASCEND_CANN_PACKAGE_PATH}}/tools/tikicpulib/lib/cmake)
    find_package(tikicpulib REQUIRED)
    add_library(sage_kernels SHARED ${{KERNEL_FILES}}
        ${{CMAKE_CURRENT_SOURCE_DIR}}/twin/{n.snake}_twin.cpp
        ${{CMAKE_CURRENT_SOURCE_DIR}}/op_host/{n.snake}_tiling_func.cpp)
    target_include_directories(sage_kernels PRIVATE ${{CMAKE_CURRENT_SOURCE_DIR}}/op_kernel)
    target_link_libraries(sage_kernels PUBLIC tikicpulib::${{SOC_VERSION}})
    target_compile_definitions(sage_kernels PRIVATE ASCENDC_CPU_DEBUG)
    target_compile_options(sage_kernels PRIVATE -g -O0 -std=c++17)
endif()
"""


BUILD_EXT = '''"""Rendered by SAGE: builds the torch extension {module} (torch.utils.cpp_extension).

Argument: the extension spec JSON the build plan wrote. With "torch_npu": true the include and
library directories of the installed torch_npu are added here, where torch_npu can be imported.
"""
import json
import os
import shutil
import sys
from pathlib import Path

from torch.utils import cpp_extension

spec = json.loads(Path(sys.argv[1]).read_text())
for src, dst in spec.get("copy", []):  # shared per-task inputs: the first candidate's copy serves all
    dst_path = Path(dst)
    if not dst_path.exists():
        dst_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst_path.with_name(dst_path.name + ".tmp-" + str(os.getpid()))
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst_path)  # atomic: parallel workers never see half a file
include_paths, ldflags = list(spec["include_paths"]), list(spec["ldflags"])
for root, header in spec.get("find_headers", []):  # generated headers: where CMake put them
    include_paths += sorted({str(p.parent) for p in Path(root).rglob(header)})
for root, lib in spec.get("find_libs", []):  # libNAME.so built by CMake
    for found in sorted({p.parent for p in Path(root).rglob("lib" + lib + ".so")}):
        ldflags += ["-L" + str(found), "-Wl,-rpath," + str(found)]
    ldflags.append("-l" + lib)
if spec.get("torch_npu"):
    import torch_npu

    root = os.path.dirname(torch_npu.__file__)
    include_paths.append(os.path.join(root, "include"))
    ldflags += ["-L" + os.path.join(root, "lib"), "-ltorch_npu"]
Path(spec["build_directory"]).mkdir(parents=True, exist_ok=True)
cpp_extension.load(
    name=spec["name"],
    sources=spec["sources"],
    extra_include_paths=include_paths,
    extra_cflags=spec["cflags"],
    extra_ldflags=ldflags,
    build_directory=spec["build_directory"],
    verbose=True,
)
print("built", spec["name"])
'''


def build_ext_script(task: Task) -> str:
    return BUILD_EXT.replace("{module}", op_names(task).python_module)


__all__ = [
    "aclnn_prelude",
    "build_ext_script",
    "direct_binding",
    "framework_binding",
    "kernel_cmake",
    "twin_driver",
]
