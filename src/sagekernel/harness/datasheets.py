"""Accelerators' peak memory bandwidth and compute, from their makers' published figures (issue 31).

The one table of datasheet peaks the roofline score (roofline.py) uses for GPUs and Ascend NPUs;
a CPU's peaks are measured instead (peaks.py). Each row names its source. Compute peaks are dense
(no sparsity), per element type, on the units a hand-written kernel of that type uses: FP32 on
NVIDIA is the CUDA cores' figure (not TF32 tensor cores, which change the arithmetic); FP16/BF16
is the tensor cores' (cube units' on Ascend). A device or element type not listed has no compute
bound: the roofline then uses its bandwidth alone, and says so.

Matching is by substring of the device name as the runtime reports it (torch.cuda.get_device_name,
torch_npu's npu name), most specific row first.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DevicePeaks:
    name: str
    match: tuple[str, ...]  # lowercase substrings of the reported device name, all required
    bandwidth_bytes_per_s: float
    flops_per_s: dict[str, float] = field(default_factory=dict)  # by element type
    source: str = ""


T = 1e12
DATASHEET: tuple[DevicePeaks, ...] = (
    DevicePeaks("NVIDIA H200 SXM", ("h200",), 4.8 * T, {"float32": 67 * T, "float16": 989 * T,
                                                        "bfloat16": 989 * T},
                "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200), SXM column"),
    DevicePeaks("NVIDIA H100 SXM", ("h100", "hbm3"), 3.35 * T, {"float32": 67 * T, "float16": 989 * T,
                                                                "bfloat16": 989 * T},
                "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100), SXM column"),
    DevicePeaks("NVIDIA H100 PCIe", ("h100",), 2.0 * T, {"float32": 51 * T, "float16": 756 * T,
                                                         "bfloat16": 756 * T},
                "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100), PCIe column"),
    DevicePeaks("NVIDIA A100 80GB", ("a100", "80gb"), 2.039 * T, {"float32": 19.5 * T, "float16": 312 * T,
                                                                  "bfloat16": 312 * T},
                "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100), 80GB SXM"),
    DevicePeaks("NVIDIA A100 40GB", ("a100",), 1.555 * T, {"float32": 19.5 * T, "float16": 312 * T,
                                                           "bfloat16": 312 * T},
                "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100), 40GB"),
    DevicePeaks("NVIDIA L40S", ("l40s",), 0.864 * T, {"float32": 91.6 * T, "float16": 362.05 * T,
                                                      "bfloat16": 362.05 * T},
                "NVIDIA L40S datasheet (nvidia.com/en-us/data-center/l40s), dense tensor figures"),
    DevicePeaks("NVIDIA GeForce RTX 4090", ("4090",), 1.008 * T, {"float32": 82.6 * T},
                "NVIDIA Ada Lovelace architecture whitepaper v1.0, GeForce RTX 4090 specifications"),
    DevicePeaks("Huawei Ascend 910C", ("910c",), 3.2 * T, {"float16": 800 * T, "bfloat16": 800 * T},
                "Huawei's announced Ascend 910C figures as reported by the press (two 910B-class dies): "
                "about 800 TFLOPS FP16 and 3.2 TB/s HBM; no public datasheet, treat as approximate"),
    DevicePeaks("Huawei Ascend 910B", ("910b",), 1.6 * T, {"float16": 313 * T, "bfloat16": 313 * T},
                "Huawei Atlas 800T A2 training server specifications (Ascend 910B, 313 TFLOPS FP16 per "
                "NPU); HBM2e bandwidth: public reports disagree (1.2-1.6 TB/s), the higher is used so the "
                "bound is never loose; no public datasheet, treat as approximate"),
)


def lookup(device_name: str) -> DevicePeaks | None:
    """The first row whose substrings all occur in the device's name (case-insensitive)."""
    name = device_name.lower()
    return next((row for row in DATASHEET if all(m in name for m in row.match)), None)


__all__ = ["DATASHEET", "DevicePeaks", "lookup"]
