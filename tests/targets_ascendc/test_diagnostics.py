# ruff: noqa: E501  (compiler logs are quoted verbatim, long lines included)
"""Error trimming on realistic bisheng / host compiler / CMake / msOpGen / runtime output."""

from __future__ import annotations

from pathlib import Path

from sagekernel.targets.ascendc.diagnostics import parse_log, trim_build_log, trim_runtime_error

WD = Path("/tmp/sage-eval-7f3a")
MODEL = {"op_kernel/add_custom.cpp", "op_host/add_custom.cpp", "op_host/add_custom_tiling.h"}

BISHENG = f"""[ 12%] Building CXX object op_kernel/CMakeFiles/ascendc_kernels.dir/add_custom.cpp.o
{WD}/project/op_kernel/add_custom.cpp:41:9: error: use of undeclared identifier 'tilingDat'; did you mean 'tilingData'?
   41 |         tilingDat.totalLength, tilingData.tileNum);
      |         ^~~~~~~~~
      |         tilingData
{WD}/project/op_kernel/add_custom.cpp:40:5: note: 'tilingData' declared here
{WD}/project/op_kernel/add_custom.cpp:57:28: warning: unused variable 'blockIdx' [-Wunused-variable]
In file included from {WD}/project/op_kernel/add_custom.cpp:1:
In file included from /usr/local/Ascend/ascend-toolkit/latest/compiler/tikcpp/tikcfw/kernel_operator.h:22:
/usr/local/Ascend/ascend-toolkit/latest/compiler/tikcpp/tikcfw/interface/kernel_operator_vec_binary_intf.h:35:6: error: no matching function for call to 'AddImpl'
   35 |     AddImpl<T>(dst, src0, src1, count);
      |     ^~~~~~~~~~
/usr/local/Ascend/ascend-toolkit/latest/compiler/tikcpp/tikcfw/impl/kernel_operator_vec_binary_impl.h:88:6: note: candidate template ignored: deduced conflicting types for parameter 'T' ('half' vs. 'float')
{WD}/project/op_kernel/add_custom.cpp:63:9: note: in instantiation of function template specialization 'AscendC::Add<half>' requested here
   63 |         Add(zLocal, xLocal, yLocal, this->tileLength);
2 errors generated.
make[2]: *** [op_kernel/CMakeFiles/ascendc_kernels.dir/build.make:76: op_kernel/CMakeFiles/ascendc_kernels.dir/add_custom.cpp.o] Error 1
make[1]: *** [CMakeFiles/Makefile2:412: op_kernel/CMakeFiles/ascendc_kernels.dir/all] Error 2
"""

HOST = f"""{WD}/project/op_host/add_custom.cpp: In function 'ge::graphStatus optiling::TilingFunc(gert::TilingContext*)':
{WD}/project/op_host/add_custom.cpp:19:12: error: 'class optiling::AddCustomTilingData' has no member named 'set_tileNumber'; did you mean 'set_tileNum'?
   19 |     tiling.set_tileNumber(TILE_NUM);
      |            ^~~~~~~~~~~~~~
gmake[2]: *** [op_host/CMakeFiles/cust_optiling.dir/build.make:76: op_host/CMakeFiles/cust_optiling.dir/add_custom.cpp.o] Error 1
"""

CMAKE = f"""-- The CXX compiler identification is GNU 11.4.0
CMake Error at {WD}/project/CMakeLists.txt:12 (ascendc_library):
  Unknown CMake command "ascendc_library".

-- Configuring incomplete, errors occurred!
"""

MSOPGEN = """[INFO] Start to generate kernel binary for op AddCustom
[ERROR] TBE(3547,python3):2026-12-01-10:12:01 [op_compile] compile op AddCustom failed: kernel_meta is empty
[ERROR] binary compile failed
"""

LINK = "/usr/bin/ld: build/sage_abs_custom.o: in function `run': undefined reference to `aclnnAbsCustomGetWorkspaceSize'\n"


def test_bisheng_errors_map_to_model_files_and_keep_call_site():
    diags = parse_log(BISHENG, WD, MODEL)
    assert [(d.path, d.line, d.origin) for d in diags] == [
        ("op_kernel/add_custom.cpp", 41, "model"),
        ("<CANN>/kernel_operator_vec_binary_intf.h", 35, "toolkit"),
    ]
    assert "tilingDat" in diags[0].message and any("^~~" in c for c in diags[0].context)
    assert "op_kernel/add_custom.cpp:63: note: in instantiation" in diags[1].context[-1]
    text = trim_build_log(BISHENG, WD, MODEL, stage="build")
    assert text.startswith(
        "build failed:\nop_kernel/add_custom.cpp:41:9: error: use of undeclared identifier"
    )
    assert str(WD) not in text and "warning" not in text and "make[2]" not in text
    assert "/usr/local/Ascend" not in text


def test_host_compiler_error():
    text = trim_build_log(HOST, WD, MODEL)
    assert (
        "op_host/add_custom.cpp:19:12: error: 'class optiling::AddCustomTilingData' has no member named "
        "'set_tileNumber'" in text
    )
    assert "gmake" not in text


def test_cmake_error_in_skeleton_is_marked():
    diags = parse_log(CMAKE, WD, MODEL)
    assert len(diags) == 1 and diags[0].path == "CMakeLists.txt" and diags[0].origin == "skeleton"
    assert 'Unknown CMake command "ascendc_library"' in diags[0].message
    assert "fixed skeleton file" in trim_build_log(CMAKE, WD, MODEL)


def test_msopgen_and_linker_errors():
    text = trim_build_log(MSOPGEN, WD, MODEL)
    assert "compile op AddCustom failed" in text and "[INFO]" not in text
    assert "undefined reference to `aclnnAbsCustomGetWorkspaceSize'" in trim_build_log(LINK, WD, MODEL)


def test_model_errors_come_first_and_length_is_capped():
    log = "\n".join(f"{WD}/project/op_kernel/add_custom.cpp:{i}:1: error: thing {i}" for i in range(1, 40))
    text = trim_build_log(log, WD, MODEL)
    assert text.count("error: thing") == 6 and "33 more errors not shown" in text and len(text) < 2200


def test_unrecognised_log_falls_back_to_its_tail():
    text = trim_build_log("line a\nline b\nsegmentation fault\n", WD, MODEL)
    assert text.endswith("line a\nline b\nsegmentation fault")


def test_runtime_error_trimming():
    log = (
        f'Traceback (most recent call last):\n  File "run.py", line 3\nRuntimeError: SAGE_CHECK(aclnnAddCustom(...)) '
        "failed with 561103\nEZ9999: Inner Error!\n        The error from device(0), serial number is 4, there is an "
        f"aicore error, core id is 3, error code = 0x800000\n[INFO] unrelated\n{WD}/project/op_kernel/add_custom.cpp"
    )
    text = trim_runtime_error(log, WD)
    assert "failed with 561103" in text and "EZ9999: Inner Error!" in text and "aicore error" in text
    assert "[INFO] unrelated" not in text
