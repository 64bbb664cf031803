"""The operator task record.

A task is a Python file in the KernelBench convention -- `Model(nn.Module)`, `get_inputs()`,
`get_init_inputs()` -- plus a module-level `SAGE_TASK` metadata dict:

    B = 64          # size symbols are module-level ints that get_inputs() reads;
    D = 1000        # the harness rebinds them to run other shapes (held-out variants)

    SAGE_TASK = {
        "name": "rms_norm", "level": 2, "category": "normalization",
        "description": "RMSNorm over the last dimension with a learned weight.",
        "inputs":  {"x": ["B", "D"], "weight": ["D"]},     # names in get_inputs() order
        "outputs": {"out": ["B", "D"]},                    # names in forward() output order
        "attrs":   {"eps": 1e-6},                          # scalars the kernel receives
        "sizes":   {"B": 64, "D": 1000},                   # defaults (must match the module ints)
        "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 64}],
        "dtype": "float32", "atol": 1e-4, "rtol": 1e-4,
    }

Element types of inputs and outputs are read from the tensors the file produces, so the
metadata holds only what cannot be observed. The loader (tasks/loader.py) validates the
metadata against one run of the reference and turns problems into `TaskError`s naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

#: Element types a kernel contract can carry, by torch dtype name.
SUPPORTED_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
                    "uint8", "bool")


@dataclass(frozen=True)
class TensorSpec:
    """One input or output tensor: its name, symbolic shape and element type."""

    name: str
    dims: tuple[str, ...]  # size symbols, outermost first; () is a scalar tensor
    dtype: str  # one of SUPPORTED_DTYPES

    def numel(self, sizes: dict[str, int]) -> int:
        n = 1
        for d in self.dims:
            n *= sizes[d]
        return n


@dataclass
class Task:
    """An operator to synthesise (architecture.md `Task`)."""

    name: str
    level: int  # 1-3
    category: str
    description: str
    source_path: Path  # the KernelBench-style Python file
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    attrs: dict[str, float | int] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    variants: list[dict[str, int]] = field(default_factory=list)
    dtype: str = "float32"
    atol: float = 1e-2
    rtol: float = 1e-2
    #: Hand-written correct kernel per target ("cpu" -> path). Used by selfcheck and tests only;
    #: never shown to the model.
    reference_kernels: dict[str, Path] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.source_path.read_text(encoding="utf-8")

    def all_shapes(self) -> list[dict[str, int]]:
        """The default sizes followed by every variant (each variant overrides some symbols)."""
        return [dict(self.sizes)] + [{**self.sizes, **v} for v in self.variants]
