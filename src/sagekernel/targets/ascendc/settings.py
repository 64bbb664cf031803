"""Per-task Ascend C settings: template, forbidden high-level APIs, NPU tolerances.

A task file may carry a module-level literal `SAGE_ASCENDC = {...}` (read with `ast`, never by
importing the file, so the lint costs nothing and runs no task code):

    SAGE_ASCENDC = {
        "template": "kernel-only",            # or "full" (NPUKernelBench's two templates)
        "forbidden_apis": ["Sigmoid"],        # Ascend C APIs that would implement the op's core
        "atol": 1e-3, "rtol": 1e-3,           # this target's tolerances for the task
    }

The tolerances replace the task's own in every comparison of an ascendc verdict (the harness's
comparator, through AscendCTarget.tolerances and harness/tolerances.py) and in the calibration of
the task's reference on the NPU (calibrate.py). There is no per-target comparison RULE: the
harness's comparator judges every target alike, and NPUKernelBench's own rule (fail where both the
absolute and the relative error exceed) has its one home in tasks/npukb_rule.py, applied beside
the harness's verdict to every benchmark task. A `compare` key is reported as a problem.

A task whose reference multiplies matrices (`needs_cube`: `@`, matmul / bmm / linear / conv /
einsum / attention calls in its `Model`) gets the full template unless its file names one: the
kernel-only skeleton launches vector (AIV) kernels only -- it has no `TCubeTiling` from
`matmul_tiling::MatmulApiTiling` and caps the block count at the AIV cores, where a MIX kernel's
block count is the AIC cores (audit H7).

The built-in suite's tasks get sensible `forbidden_apis` from `BUILTIN_FORBIDDEN` (paper C.3: no
equivalent high-level substitution). Primitive ops keep their primitive instruction (abs may use
`Abs`, exp may use `Exp`): only composite APIs that replace the work being asked for are listed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from sagekernel.tasks.task import Task

TEMPLATES = ("kernel-only", "full")

#: task name -> Ascend C APIs (unqualified; `AscendC::` is implied) that would implement its core.
BUILTIN_FORBIDDEN: dict[str, tuple[str, ...]] = {
    # Completed against CANN's high-level API set (asc-devkit include/adv_api/...: activation,
    # normalization, reduce, math, index, quantization). A name also forbids its implementation
    # family (`SigmoidImpl`, `SoftMaxV2`: integrity.in_family).
    "swish": ("Sigmoid", "Swish", "Silu"),
    "mul_sigmoid": ("Sigmoid", "Swish", "Silu"),
    "softmax": ("SoftMax", "SimpleSoftMax", "SoftmaxFlash", "LogSoftMax", "AdjustSoftMaxRes"),
    "log_softmax": ("LogSoftMax", "SoftMax", "SimpleSoftMax", "SoftmaxFlash"),
    "cross_entropy": ("LogSoftMax", "SoftMax", "SimpleSoftMax", "SoftmaxFlash"),
    "gelu": ("Gelu", "FasterGelu"),
    "fast_gelu": ("Gelu", "FasterGelu"),
    "geglu": ("GeGLU", "Gelu", "FasterGelu"),
    "swiglu": ("SwiGLU", "Swish", "Silu", "Sigmoid"),
    "swiglu_quant": ("SwiGLU", "Swish", "Silu", "Sigmoid", "AscendQuant", "Quantize"),
    "layer_norm": ("LayerNorm", "Normalize", "WelfordUpdate", "WelfordFinalize", "DeepNorm"),
    "add_layer_norm": ("LayerNorm", "Normalize", "WelfordUpdate", "WelfordFinalize", "DeepNorm"),
    "rms_norm": ("RmsNorm",),
    "rms_norm_rope": ("RmsNorm",),
    "group_norm": ("GroupNorm", "Normalize", "WelfordUpdate", "WelfordFinalize"),
    "mean_var": ("Mean", "WelfordUpdate", "WelfordFinalize", "LayerNorm", "Normalize"),
    "reduce_sum": ("Sum",),  # ReduceSum is the basic instruction, like Abs for abs
    "argmax": ("ArgMax",),  # ReduceMax(..., calIndex=true) is not told apart statically
    "isfinite": ("IsFinite",),
    "isinf": ("IsInf",),
    "arange": ("ArithProgression",),
    "linspace": ("ArithProgression",),
    "clip_by_value": ("ClampMax", "ClampMin", "Clamp"),
    "cumsum": ("CumSum",),
    "quantize_per_channel": ("AscendQuant", "Quantize"),
    "dequantize_per_channel": ("AscendDequant", "AscendAntiQuant", "Dequantize", "AntiQuantize"),
    "matmul_bias_gelu": ("Gelu", "FasterGelu"),
    "attention": ("SoftMax", "SimpleSoftMax", "SoftmaxFlash", "LogSoftMax"),
}


@dataclass(frozen=True)
class AscendTaskSettings:
    template: str | None = None  # None: the configuration decides
    forbidden_apis: tuple[str, ...] = ()
    atol: float | None = None
    rtol: float | None = None
    problems: tuple[str, ...] = field(default_factory=tuple)  # why a SAGE_ASCENDC entry was ignored
    cube: bool = False  # the reference multiplies matrices: the cube unit's work (needs_cube)


#: Calls that put a reference's work on the cube unit (matrix products, convolutions, attention),
#: as functions (torch.matmul, F.linear), tensor methods (x.mm) or modules (nn.Linear).
CUBE_CALLS = frozenset({
    "matmul", "mm", "bmm", "baddbmm", "addmm", "addbmm", "addmv", "mv", "einsum", "tensordot",
    "linear", "Linear", "bilinear", "Bilinear", "conv1d", "conv2d", "conv3d", "Conv1d", "Conv2d",
    "Conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "ConvTranspose1d",
    "ConvTranspose2d", "ConvTranspose3d", "scaled_dot_product_attention", "MultiheadAttention",
})


def needs_cube(tree: ast.Module) -> bool:
    """Whether the task's `Model` (the whole file if it has none) multiplies matrices: a `@`, or a
    call named in CUBE_CALLS."""
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), tree)
    for node in ast.walk(model):
        if isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.MatMult):
            return True
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in CUBE_CALLS:
                return True
    return False


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def _literal_block(tree: ast.Module | None) -> object:
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "SAGE_ASCENDC" for t in node.targets
        ):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return "not a literal"
    return None


def task_settings(task: Task) -> AscendTaskSettings:
    """The task's Ascend settings: built-in defaults, overridden by the file's SAGE_ASCENDC."""
    forbidden = BUILTIN_FORBIDDEN.get(task.name, ())
    try:
        tree = _parse(task.source)
    except OSError:
        tree = None
    raw = _literal_block(tree)
    cube = tree is not None and needs_cube(tree)
    if raw is None:
        return AscendTaskSettings(forbidden_apis=forbidden, cube=cube)
    if not isinstance(raw, dict):
        return AscendTaskSettings(forbidden_apis=forbidden, problems=("SAGE_ASCENDC is not a dict literal",),
                                  cube=cube)
    problems: list[str] = []
    template = raw.get("template")
    if template is not None and template not in TEMPLATES:
        problems.append(f"template {template!r} is not one of {TEMPLATES}")
        template = None
    if "compare" in raw:
        problems.append("compare is not a setting: the harness's comparator judges every target; "
                        "NPUKernelBench's rule applies to benchmark tasks (tasks/npukb_rule.py)")
    apis = raw.get("forbidden_apis", forbidden)
    if not isinstance(apis, list | tuple) or not all(isinstance(a, str) for a in apis):
        problems.append("forbidden_apis must be a list of API names")
        apis = forbidden
    tolerances: dict[str, float | None] = {}
    for key in ("atol", "rtol"):
        value = raw.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf")
        ):
            problems.append(f"{key} must be a finite number >= 0, not {value!r}")
            value = None
        tolerances[key] = None if value is None else float(value)
    return AscendTaskSettings(
        template=template,
        forbidden_apis=tuple(a.removeprefix("AscendC::") for a in apis),
        atol=tolerances["atol"],
        rtol=tolerances["rtol"],
        problems=tuple(problems),
        cube=cube,
    )


__all__ = [
    "BUILTIN_FORBIDDEN", "CUBE_CALLS", "TEMPLATES", "AscendTaskSettings", "needs_cube", "task_settings",
]
