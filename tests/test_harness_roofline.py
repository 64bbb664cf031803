"""The roofline score (harness/roofline.py, peaks.py, datasheets.py): bytes and FLOPs of known
tasks, the bound's arithmetic, the cache levels, the datasheet table, and the CPU probe's cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagekernel.harness import peaks as peaks_module
from sagekernel.harness.datasheets import DATASHEET, lookup
from sagekernel.harness.peaks import Peaks, cpu_peaks, datasheet_peaks, probe_cpu
from sagekernel.harness.roofline import Work, roofline, task_work
from sagekernel.report.scores import fraction_summary
from sagekernel.tasks.loader import load_task
from sagekernel.tasks.suites import find_task

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tasks"
GB, TF = 1e9, 1e12


def test_a_matmul_moves_its_three_matrices_and_does_2mnk_flops() -> None:
    work = task_work(load_task(FIXTURES / "matmul_small.py"))
    m, k, n = 64, 96, 80
    assert work.bytes_moved == 4 * (m * k + k * n + m * n)
    assert work.flops == 2 * m * n * k
    held = task_work(load_task(FIXTURES / "matmul_small.py"), {"M": 13, "K": 31, "N": 7})
    assert (held.bytes_moved, held.flops) == (4 * (13 * 31 + 31 * 7 + 13 * 7), 2 * 13 * 7 * 31)


def test_an_elementwise_task_is_bounded_by_its_bytes_alone() -> None:
    task = find_task("abs")
    work = task_work(task)
    b, d = task.sizes["B"], task.sizes["D"]
    assert work.bytes_moved == 2 * 4 * b * d and work.flops == 0  # read x, write out; no counted FLOPs
    peaks = Peaks("test", 100 * GB, {"float32": 1 * TF}, "datasheet")
    r = roofline(work, 0.02, peaks)
    assert r.bound == "memory" and r.compute_ms == 0.0
    assert r.bound_ms == pytest.approx(work.bytes_moved / (100 * GB) * 1e3)
    assert r.fraction == pytest.approx(r.bound_ms / 0.02)


def test_the_bound_is_the_larger_of_memory_and_compute_time() -> None:
    peaks = Peaks("test", 100 * GB, {"float32": 1 * TF}, "datasheet")
    compute_bound = roofline(Work(10**6, 10**9, "float32", {}), 2.0, peaks)
    assert compute_bound.memory_ms == pytest.approx(0.01) and compute_bound.compute_ms == pytest.approx(1.0)
    assert compute_bound.bound == "compute" and compute_bound.fraction == pytest.approx(0.5)
    memory_bound = roofline(Work(10**9, 10**6, "float32", {}), 20.0, peaks)
    assert memory_bound.bound == "memory" and memory_bound.fraction == pytest.approx(10.0 / 20.0)
    # no compute peak for the element type: bytes alone, and the record says there was none
    no_fp16 = roofline(Work(10**6, 10**12, "float16", {}), 1.0, peaks)
    assert no_fp16.compute_ms is None and no_fp16.bound == "memory"
    with pytest.raises(ValueError):
        roofline(Work(1, 1, "float32", {}), 0.0, peaks)


def test_a_small_call_is_bounded_by_the_cache_it_fits_in_and_threads_scale_the_probe() -> None:
    levels = ((256 << 10, 200 * GB), (4 << 20, 100 * GB), (512 << 20, 30 * GB))
    cpu = Peaks("cpu", 30 * GB, {"float32": 0.2 * TF}, "probe", 1, {}, levels)
    assert cpu.bandwidth_for(100_000) == 200 * GB
    assert cpu.bandwidth_for(1 << 20) == 100 * GB
    assert cpu.bandwidth_for(1 << 30) == 30 * GB  # beyond every probed set: DRAM
    r = roofline(Work(100_000, 0, "float32", {}), 1e-3, cpu)
    assert r.bandwidth_bytes_per_s == 200 * GB and r.fraction == pytest.approx(100_000 / 200e9 * 1e3 / 1e-3)
    four = cpu.scaled(4)
    assert four.threads == 4 and four.bandwidth_for(100_000) == 800 * GB
    assert four.flops_per_s["float32"] == 0.8 * TF
    sheet = datasheet_peaks("NVIDIA H100 80GB HBM3")
    assert sheet is not None and sheet.scaled(4) is sheet  # a datasheet is the whole device's


@pytest.mark.parametrize(("reported", "row"), [
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"), ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
    ("NVIDIA H200", "NVIDIA H200 SXM"), ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB"),
    ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 40GB"), ("Ascend910B3", "Huawei Ascend 910B"),
    ("Ascend910C", "Huawei Ascend 910C"), ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
])
def test_datasheet_rows_match_the_names_devices_report(reported: str, row: str) -> None:
    found = lookup(reported)
    assert found is not None and found.name == row


def test_every_datasheet_row_is_sourced_and_plausible() -> None:
    assert lookup("Some Unknown GPU") is None
    for row in DATASHEET:
        assert row.source and 0.5 * TF <= row.bandwidth_bytes_per_s <= 10 * TF
        assert all(10 * TF <= f <= 2000 * TF for f in row.flops_per_s.values())


def test_the_cpu_probe_measures_and_is_cached_per_machine(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(peaks_module, "WORKING_SETS", (64 << 10, 8 << 20))
    monkeypatch.setattr(peaks_module, "FMA_ITERATIONS", 200_000)
    first = cpu_peaks()
    assert first.source == "probe" and first.threads == 1
    assert [s for s, _ in first.bandwidth_by_working_set] == [65520, 8388600]
    assert all(rate > 1e8 for _, rate in first.bandwidth_by_working_set)
    assert first.flops_per_s["float32"] > 1e8
    cached = json.loads((tmp_path / "peaks" / "cpu.json").read_text())
    assert cached["key"]["cpu"] and cached["peaks"]["flops_per_s"]["float32"] == first.flops_per_s["float32"]
    assert cpu_peaks() == first  # read back, not measured again
    cached["key"]["cpu"] = "another machine"
    (tmp_path / "peaks" / "cpu.json").write_text(json.dumps(cached))
    assert cpu_peaks().detail["measured_at"]  # another machine's figures are not reused


def test_a_probe_that_cannot_build_is_named() -> None:
    with pytest.raises(peaks_module.ProbeError, match="did not build"):
        probe_cpu(compiler="false")


def test_fraction_summary() -> None:
    assert fraction_summary([])["count"] == 0
    s = fraction_summary([0.1, 0.2, 0.4, 0.8])
    assert s["count"] == 4 and s["median"] == pytest.approx(0.3) and s["min"] == 0.1 and s["max"] == 0.8
