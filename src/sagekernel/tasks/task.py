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
metadata holds only what cannot be observed. Files without ``SAGE_TASK`` (KernelBench,
MultiKernelBench, NPUKernelBench as published) are inferred (tasks/infer.py); see the fields below
for what such files add: non-tensor forward arguments, several input groups, model parameters,
companion files and a size policy. The loader (tasks/loader.py) validates the
metadata against one run of the reference and turns problems into `TaskError`s naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from sagekernel.errors import TaskError
from sagekernel.tasks.coverage import Coverage


class TaskNeedsDevice(TaskError):
    """The task file needs a device (and its Python package) this machine does not have."""

    def __init__(self, message: str, device: str) -> None:
        super().__init__(message)
        self.device = device


#: Element types a kernel contract can carry, by torch dtype name.
SUPPORTED_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
                    "uint8", "bool")


@dataclass(frozen=True)
class TensorSpec:
    """One input or output tensor: its name, symbolic shape and element type."""

    name: str
    dims: tuple[str, ...]  # size symbols, outermost first; () is a scalar tensor
    dtype: str  # one of SUPPORTED_DTYPES

    #: Where the tensor comes from: "input" (get_inputs / an input group) or, for `Task.params`,
    #: the dotted name of the Model's parameter or buffer (e.g. "conv.weight").
    origin: str = "input"

    def numel(self, sizes: dict[str, int]) -> int:
        n = 1
        for d in self.dims:
            n *= sizes[d]
        return n


@dataclass(frozen=True)
class ForwardArg:
    """One positional argument of the reference ``forward()``, in call order.

    - ``tensor``: the input tensor named `name` (one of the task's inputs);
    - ``scalar``: a Python int/float/bool, passed to the kernel as the attr `name` (value `value`);
    - ``list``: a list/tuple of numbers, passed as the attrs ``name_0 .. name_{k-1}``;
    - ``none``: an absent optional tensor (``None``); the kernel receives nothing for it;
    - ``string``: a string (a layout such as ``"BSND"``, a reduction mode): a string attribute the
      kernel is specialised for (`value`), not a numeric attr;
    - ``tensors``: a list of `value` (an int) tensors, inputs ``name_0 .. name_{value-1}``, in order
      among the task's inputs (the Foreach family, grouped matmuls).
    """

    kind: str  # "tensor" | "scalar" | "list" | "none" | "string" | "tensors"
    name: str
    value: int | float | bool | str | tuple[int | float, ...] | None = None


#: `BenchmarkSpec.format` of an operator loaded from NPUKernelBench (tasks/npukernelbench.py).
NPUKERNELBENCH = "npukernelbench"


@dataclass
class BenchmarkSpec:
    """What a benchmark with its own scoring publishes about a task (NPUKernelBench:
    tasks/npukernelbench.py). Only the benchmark's own files feed it, never its expert answers."""

    format: str  # "npukernelbench"
    #: Each case's parameters (one row of test_cases.csv), by input group name ("case0" ...).
    cases: dict[str, dict[str, int | float | bool | str]] = field(default_factory=dict)
    #: Cases the benchmark has (the score's denominator), including any left out here.
    case_count: int = 0
    max_abs_error: float = 0.001
    max_rel_error: float = 0.001
    #: The task defines custom_check_precision (used instead of the tolerances).
    custom_check: bool = False
    #: ``kernel_gen_ops.<op>``: the Python interface ModelNew calls.
    kernel_op: str = ""
    #: The starting project (``question/``): path relative to it -> file. Ascend C target only.
    skeleton: dict[str, str] = field(default_factory=dict)
    #: Cases over this machine's size budget (they count as not passed here).
    left_out: list[str] = field(default_factory=list)


@dataclass
class InputGroup:
    """One input set of a task that defines ``get_input_groups()`` (NPUKernelBench style).

    Groups may differ in shapes, dtypes and non-tensor arguments; `Task.group_task(i)` is the task
    as seen by the harness for group i (its inputs, outputs, sizes, attrs and forward args).
    """

    name: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    sizes: dict[str, int]
    attrs: dict[str, float | int]
    forward_args: list[ForwardArg]
    #: Position in what get_input_groups() returns (groups over the size budget are left out).
    index: int = 0


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
    #: The Model's parameters and buffers, passed to kernels after the inputs (`sagekernel.tasks.
    #: reference.param_tensors` makes them for given sizes and seed). Empty for parameter-free models.
    params: list[TensorSpec] = field(default_factory=list)
    #: The positional forward() call; empty means "the inputs, in order" (every tensor-only task).
    forward_args: list[ForwardArg] = field(default_factory=list)
    #: Input groups of a ``get_input_groups()`` file (group 0's fields are also the task's own).
    groups: list[InputGroup] = field(default_factory=list)
    #: Which group this record describes (None: not a group task, or group 0 via the top level).
    group_index: int | None = None
    #: Files next to the task that it reads (JSON cases ...): ship them with `source_path`.
    companion_files: list[Path] = field(default_factory=list)
    #: The sizes the file sets (module-level ints) when the size policy scaled them down to
    #: `sizes`; empty when `sizes` are the published ones.
    published_sizes: dict[str, int] = field(default_factory=dict)
    #: Module-level tuples of sizes the policy scaled (``input_shape``), rebound with `sizes`.
    size_tuples: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: Module-level ints the size policy scaled that are no size symbol of any tensor (e.g. a
    #: Linear's out_features that no input shows): rebound with the sizes, like `size_tuples`.
    scaled_ints: dict[str, int] = field(default_factory=dict)
    #: One line saying what the size policy did (or that it left the sizes alone).
    size_note: str = ""
    #: Where level and category came from: "metadata", "folder", "guess" or "default".
    layout_note: str = ""
    #: The operator's specification as its benchmark shows it to the model (NPUKernelBench's
    #: api_desc.md); empty when the benchmark has none (the reference source is the spec).
    specification: str = ""
    #: The benchmark's own cases, rule and starting project (None for plain KernelBench files).
    benchmark: BenchmarkSpec | None = None
    #: What the task declares about its valid inputs (size rules, attribute domains, special
    #: values, ties, structured-input domains, edge cases): tasks/coverage.py.
    coverage: Coverage = field(default_factory=Coverage)
    #: Module variables rebound with the sizes (`binding`): an attributes trial's drawn values
    #: (`with_attrs`); empty for the published attributes.
    attr_binding: dict[str, float | int] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.source_path.read_text(encoding="utf-8", errors="replace")

    @property
    def task_dir(self) -> Path:
        """The task file's folder: companion files are relative to it."""
        return self.source_path.parent

    def group_task(self, index: int) -> Task:
        """The task as the harness sees group `index` (a copy; `self` for a task without groups)."""
        if not self.groups:
            if index != 0:
                raise IndexError(f"task {self.name} has no input group {index}")
            return self
        g = self.groups[index]
        return replace(self, inputs=list(g.inputs), outputs=list(g.outputs), sizes=dict(g.sizes),
                       attrs=dict(g.attrs), forward_args=list(g.forward_args), variants=[],
                       group_index=index)

    def group_tasks(self) -> list[Task]:
        """One task per input group (just `[self]` without groups): check each, time each."""
        return [self.group_task(i) for i in range(max(1, len(self.groups)))]

    def binding(self, sizes: dict[str, int]) -> dict[str, int | float | tuple[int, ...]]:
        """What to rebind in the task's module to run it at `sizes` (with the scaled tuples)."""
        return {**self.scaled_ints, **self.size_tuples, **self.attr_binding, **sizes}

    def with_attrs(self, attrs: dict[str, float | int]) -> Task:
        """The task with attribute values `attrs` (drawn from `coverage.attr_domains`): its
        module variables are rebound to them wherever the file runs (`binding`)."""
        domains = self.coverage.attr_domains
        unknown = sorted(set(attrs) - set(domains))
        if unknown:
            raise TaskError(f"task {self.name}: attrs {unknown} have no declared domain")
        return replace(self, attrs={**self.attrs, **attrs},
                       attr_binding={**self.attr_binding, **{domains[k].bind: v for k, v in attrs.items()}})

    def all_shapes(self) -> list[dict[str, int]]:
        """The default sizes followed by every variant (each variant overrides some symbols)."""
        return [dict(self.sizes)] + [{**self.sizes, **v} for v in self.variants]
