"""A task's inputs: calling the file's hooks, sampling tensors, scaling tolerances.

These are the helpers the harness calls to build what a kernel and the reference run on (the
reference itself is tasks/reference.py). All of them go through the task file's cached module
(`modules.task_module`), rebind its size symbols for the call, and never disturb the caller's
global RNG state (`torch.random.fork_rng`).

Value distributions (`DISTRIBUTIONS`):

- ``default``: exactly what the file's ``get_inputs()`` produces under ``torch.manual_seed(seed)``;
- ``uniform``: U(-1, 1);
- ``normal``: N(0, 1);
- ``offset_uniform``: U(lo, lo + w) with lo ~ U(-4, 4) and w ~ U(0.5, 4) drawn per tensor;
- ``heavy_tailed``: Student-t with 3 degrees of freedom (infinite fourth moment), random scale;
- ``large_magnitude``: N(0, 1) * 1000;
- ``large_offset``: N(mu, 1) with |mu| ~ U(100, 1000) drawn per tensor (a large mean over a unit
  spread: single-pass variance and other cancellation-prone float accumulations fail here).

Without a ``make_inputs`` hook, a non-default distribution re-draws every floating-point input from
that distribution and keeps integer and bool inputs exactly as ``get_inputs()`` made them (so index
tensors stay in range). Inputs named in ``SAGE_TASK["structured_inputs"]`` (weights, cos/sin tables,
quantisation scales) are also kept, unless the task gives them a domain
(``SAGE_TASK["structured_domains"]``, tasks/coverage.py): then they are re-drawn within it
(tasks/special.py), so a kernel cannot rely on the published table's structure (equal halves).
The trial kinds ``special_values`` and ``ties`` and the task's named edge cases are accepted too
(`trial_kinds`).

A task file whose inputs have a domain (non-negative, inf/nan present, ties between two tensors,
probabilities, valid scales) defines
``make_inputs(sizes: dict[str, int], gen: torch.Generator | None, distribution: str) -> list[Tensor]``,
which is then used for every distribution, ``default`` included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import torch

from sagekernel.errors import TaskError
from sagekernel.tasks.modules import bound_sizes, task_module
from sagekernel.tasks.task import Task, TensorSpec

DISTRIBUTIONS = ("default", "uniform", "normal", "offset_uniform", "heavy_tailed", "large_magnitude",
                 "large_offset")

#: Salt so the re-drawn floats do not reuse the stream `get_inputs()` consumed.
_REDRAW_SALT = 0x5A6E_0001


# ----------------------------------------------------------------------------- low-level calls

def seed_cpu(seed: int) -> None:
    """`torch.manual_seed` for the CPU generator only: the same stream, without queueing a lazy
    CUDA seeding that records a formatted stack each time (measured: ~4 ms of a timing run's
    per-call input building)."""
    torch.random.default_generator.manual_seed(seed)


def call_get_inputs(module: ModuleType, path: object) -> list[torch.Tensor]:
    """Call `get_inputs()` and check it returns a list/tuple of tensors."""
    fn = getattr(module, "get_inputs", None)
    if not callable(fn):
        raise TaskError(f"{path}: defines no get_inputs() function")
    try:
        raw = fn()
    except MemoryError as exc:
        raise TaskError(f"{path}: get_inputs() ran out of memory (MemoryError); "
                        "lower the sizes in the file") from exc
    except Exception as exc:
        raise TaskError(f"{path}: get_inputs() raised {type(exc).__name__}: {exc}") from exc
    return _tensor_list(raw, f"{path}: get_inputs()")


def call_get_args(module: ModuleType, path: object) -> list[Any]:
    """Call `get_inputs()` and check every item is a forward argument a contract can carry:
    a tensor, a Python number or bool, a list/tuple of numbers, or None (an absent tensor)."""
    fn = getattr(module, "get_inputs", None)
    if not callable(fn):
        raise TaskError(f"{path}: defines no get_inputs() function")
    try:
        raw = fn()
    except MemoryError as exc:
        raise TaskError(f"{path}: get_inputs() ran out of memory (MemoryError); "
                        "lower the sizes in the file") from exc
    except Exception as exc:
        raise TaskError(f"{path}: get_inputs() raised {type(exc).__name__}: {exc}") from exc
    return checked_args(raw, f"{path}: get_inputs()")


def call_input_groups(module: ModuleType, path: object) -> list[tuple[str, list[Any]]]:
    """Call `get_input_groups()`: a non-empty list whose items are argument lists, or dicts
    ``{"name": str, "inputs": [...]}``. Returns (group name, checked args) per group."""
    fn = getattr(module, "get_input_groups", None)
    if not callable(fn):
        raise TaskError(f"{path}: get_input_groups is not a function")
    from sagekernel.tasks.budget import oversized_on_meta

    try:
        try:
            with oversized_on_meta():  # an over-budget case comes back without storage (left out by size)
                raw = fn()
        except (MemoryError, RecursionError):
            raise
        except Exception:  # a builder that mixes such a tensor with real ones: build it as written
            raw = fn()
    except MemoryError as exc:
        raise TaskError(f"{path}: get_input_groups() ran out of memory (MemoryError); "
                        "lower the sizes in the file") from exc
    except Exception as exc:
        raise TaskError(f"{path}: get_input_groups() raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(raw, (list, tuple)) or not raw:
        raise TaskError(f"{path}: get_input_groups() must return a non-empty list of input lists, "
                        f"got {type(raw).__name__}")
    groups = []
    for i, group in enumerate(raw):
        name = f"group{i}"
        if isinstance(group, dict):
            name = str(group.get("name", name))
            group = group.get("inputs")
        groups.append((name, checked_args(group, f"{path}: get_input_groups() group {i}")))
    return groups


def checked_args(raw: object, what: str) -> list[Any]:
    if not isinstance(raw, (list, tuple)):
        raise TaskError(f"{what} must return a list or tuple, got {type(raw).__name__}")
    for i, a in enumerate(raw):
        if isinstance(a, torch.Tensor) or a is None or isinstance(a, (bool, int, float)):
            continue
        if isinstance(a, (list, tuple)) and all(isinstance(x, (bool, int, float)) for x in a):
            continue
        if isinstance(a, str) or is_tensor_list(a):  # a string attribute; a list of input tensors
            continue
        raise TaskError(f"{what} item {i} is a {type(a).__name__}; a forward argument must be a tensor, "
                        "a list of tensors, a Python number, a string, a list of numbers or None (wrap "
                        "other data in a tensor, or move it to get_init_inputs())")
    return list(raw)


def is_tensor_list(value: object) -> bool:
    """A non-empty list/tuple of tensors: one forward argument, several kernel inputs."""
    return isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(x, torch.Tensor) for x in value)


def flat_tensors(args: Sequence[Any]) -> list[torch.Tensor]:
    """The tensors among forward arguments, a tensor list contributing each of its tensors."""
    found: list[torch.Tensor] = []
    for a in args:
        if isinstance(a, torch.Tensor):
            found.append(a)
        elif is_tensor_list(a):
            found.extend(a)
    return found


def call_init_inputs(module: ModuleType, path: object) -> list[Any]:
    """`get_init_inputs()` as a list; its items may be of any kind (KernelBench passes ints, floats,
    tuples, strings, None ...). A missing function means no arguments."""
    fn = getattr(module, "get_init_inputs", None)
    if fn is None:
        return []
    if not callable(fn):
        raise TaskError(f"{path}: get_init_inputs is not a function")
    try:
        raw = fn()
    except MemoryError as exc:
        raise TaskError(f"{path}: get_init_inputs() ran out of memory (MemoryError); "
                        "lower the sizes in the file") from exc
    except Exception as exc:
        raise TaskError(f"{path}: get_init_inputs() raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(raw, (list, tuple)):
        raise TaskError(f"{path}: get_init_inputs() must return a list, got {type(raw).__name__}")
    return list(raw)


def instantiate(module: ModuleType, path: object, seed: int = 0) -> torch.nn.Module:
    """`Model(*get_init_inputs())` under `seed` (parameters, if any, are reproducible: KernelBench
    seeds Model and ModelNew alike), in eval mode."""
    cls = getattr(module, "Model", None)
    if cls is None or not isinstance(cls, type):
        raise TaskError(f"{path}: defines no Model class")
    init = call_init_inputs(module, path)
    with torch.random.fork_rng(devices=[]):
        seed_cpu(seed)
        try:
            model = cls(*init)
        except Exception as exc:
            raise TaskError(f"{path}: Model(*get_init_inputs()) raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(model, torch.nn.Module):
        raise TaskError(f"{path}: Model is not a torch.nn.Module")
    return model.eval()


def _task_bug_note(exc: BaseException) -> str:
    """An index out of range in the reference, on inputs the file's own builder drew, is the task
    file's bug (MultiKernelBench's kv_cache_update_with_rope_backward draws cache positions up to
    10000 for a cache of 128), said so rather than left to read as a loader failure."""
    text = str(exc)
    if isinstance(exc, IndexError) or "out of bounds" in text or "index out of range" in text:
        return (" -- a bug in the task file: its own input builder draws indices its reference "
                "cannot take")
    return ""


def call_forward(model: torch.nn.Module, inputs: Sequence[Any], path: object) -> list[torch.Tensor]:
    """Run the reference forward pass (no grad) and return its outputs as a list of tensors."""
    try:
        with torch.no_grad():
            raw = model(*inputs)
    except MemoryError as exc:
        raise TaskError(f"{path}: the reference forward() ran out of memory (MemoryError); "
                        "make the task's sizes smaller") from exc
    except Exception as exc:
        raise TaskError(f"{path}: the reference forward() raised {type(exc).__name__}: {exc}"
                        f"{_task_bug_note(exc)}") from exc
    if isinstance(raw, torch.Tensor):
        return [raw]
    return _tensor_list(raw, f"{path}: forward()")


def _tensor_list(raw: object, what: str) -> list[torch.Tensor]:
    if not isinstance(raw, (list, tuple)):
        raise TaskError(f"{what} must return a list or tuple of tensors, got {type(raw).__name__}")
    for i, t in enumerate(raw):
        if not isinstance(t, torch.Tensor):
            raise TaskError(f"{what} item {i} is a {type(t).__name__}, not a torch.Tensor")
    return list(raw)


def dtype_name(dtype: torch.dtype) -> str:
    """torch.float32 -> "float32"."""
    return str(dtype).removeprefix("torch.")


def torch_dtype(name: str) -> torch.dtype:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise TaskError(f"unknown dtype {name!r}")
    return dt


# ----------------------------------------------------------------------------- sizes

def full_sizes(task: Task, sizes: Mapping[str, int] | None) -> dict[str, int]:
    """The task's default sizes overridden by `sizes`; unknown symbols and non-positive values are
    errors, except a 0 that is the task's own default (KernelBench's `padding = 0`)."""
    merged = dict(task.sizes)
    for key, value in (sizes or {}).items():
        if key not in task.sizes:
            raise TaskError(f"task {task.name}: unknown size symbol {key!r} (known: {', '.join(task.sizes)})")
        if type(value) is not int or value < 0 or (value == 0 and task.sizes[key] != 0):
            raise TaskError(f"task {task.name}: size {key} must be a positive int, got {value!r}")
        merged[key] = value
    return merged


def expected_shape(spec: TensorSpec, sizes: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(int(sizes[d]) for d in spec.dims)


def check_tensors(task: Task, specs: Sequence[TensorSpec], tensors: Sequence[torch.Tensor],
                  sizes: Mapping[str, int], what: str) -> None:
    """Count, shape and dtype of `tensors` must match `specs` at `sizes`."""
    if len(tensors) != len(specs):
        raise TaskError(f"{task.source_path}: {what} produced {len(tensors)} tensors, "
                        f"the task declares {len(specs)} ({', '.join(s.name for s in specs)})")
    for spec, t in zip(specs, tensors, strict=True):
        want = expected_shape(spec, sizes)
        if tuple(t.shape) != want:
            raise TaskError(f"{task.source_path}: {what}: {spec.name} has shape {tuple(t.shape)}, "
                            f"expected {want} from dims {list(spec.dims)} at sizes {dict(sizes)}")
        if dtype_name(t.dtype) != spec.dtype:
            raise TaskError(f"{task.source_path}: {what}: {spec.name} has dtype {dtype_name(t.dtype)}, "
                            f"expected {spec.dtype}")


# ----------------------------------------------------------------------------- distributions

def sample_tensor(shape: Sequence[int], dtype: torch.dtype, gen: torch.Generator,
                  distribution: str) -> torch.Tensor:
    """A floating-point tensor of `shape` drawn from `distribution` (see module docstring)."""
    shape = tuple(int(s) for s in shape)
    if distribution == "uniform":
        x = torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1
    elif distribution == "normal":
        x = torch.randn(shape, generator=gen, dtype=torch.float64)
    elif distribution == "offset_uniform":
        lo = float(torch.rand((), generator=gen, dtype=torch.float64)) * 8 - 4
        width = 0.5 + 3.5 * float(torch.rand((), generator=gen, dtype=torch.float64))
        x = lo + width * torch.rand(shape, generator=gen, dtype=torch.float64)
    elif distribution == "heavy_tailed":
        z = torch.randn(shape, generator=gen, dtype=torch.float64)
        chi2 = torch.randn((3, *shape), generator=gen, dtype=torch.float64).square().sum(0)
        scale = 0.5 + 1.5 * float(torch.rand((), generator=gen, dtype=torch.float64))
        x = scale * z / torch.sqrt(chi2 / 3).clamp_min(1e-3)
    elif distribution == "large_magnitude":
        x = torch.randn(shape, generator=gen, dtype=torch.float64) * 1000.0
    elif distribution == "large_offset":
        mu = 100.0 + 900.0 * float(torch.rand((), generator=gen, dtype=torch.float64))
        sign = 1.0 if float(torch.rand((), generator=gen, dtype=torch.float64)) < 0.5 else -1.0
        x = sign * mu + torch.randn(shape, generator=gen, dtype=torch.float64)
    else:
        raise TaskError(f"unknown input distribution {distribution!r} (known: {', '.join(DISTRIBUTIONS)})")
    return x.to(dtype)


def structured_inputs(module: ModuleType) -> frozenset[str]:
    meta = getattr(module, "SAGE_TASK", None)
    return frozenset(meta.get("structured_inputs", ())) if isinstance(meta, dict) else frozenset()


def reference_scale(expected: Sequence[torch.Tensor]) -> float:
    """max(1, median |e| over the finite elements of the floating-point reference outputs).

    The absolute tolerance follows the size of what the kernel must produce, never the size of its
    inputs: a layer norm of ×1000 inputs still has O(1) outputs and keeps the task's atol, so
    reduced-precision arithmetic cannot hide behind large inputs. The median resists the few huge
    values of heavy-tailed outputs.
    """
    values = []
    for t in expected:
        if t.is_floating_point() and t.numel():
            flat = t.detach().reshape(-1)
            step = max(1, flat.numel() // 65536)  # a strided sample keeps this cheap on huge outputs
            values.append(flat[::step].double())
    if not values:
        return 1.0
    flat = torch.cat(values)
    flat = flat[torch.isfinite(flat)].abs()
    return max(1.0, float(flat.median())) if flat.numel() else 1.0


def tolerance_scale(inputs: Sequence[torch.Tensor]) -> float:
    """max(1, mean |x| over the finite elements of the floating-point inputs).

    Absolute rounding error of float32 arithmetic grows with the magnitude of the operands, so a
    task's `atol` (stated for unit-scale inputs) should be multiplied by this for the
    ``large_magnitude`` and ``heavy_tailed`` distributions: ``|d| <= atol * scale + rtol * |ref|``.
    """
    total, count = 0.0, 0
    for t in inputs:
        if t.is_floating_point() and t.numel():
            x = t.detach().double()
            x = x[torch.isfinite(x)]
            total += float(x.abs().sum())
            count += x.numel()
    return max(1.0, total / count) if count else 1.0


def raw_args(task: Task, module: ModuleType) -> list[Any]:
    """The file's forward arguments for `task` (its group, if any), under the current RNG and sizes."""
    path = task.source_path
    if task.groups:
        index = task.groups[task.group_index or 0].index
        one = getattr(module, "get_input_group", None)
        if callable(one):  # builds only the group asked for (NPUKernelBench: tasks/npukernelbench.py)
            try:
                group = one(index)
            except TaskError:
                raise
            except Exception as exc:
                raise TaskError(f"{path}: get_input_group({index}) raised "
                                f"{type(exc).__name__}: {exc}") from exc
            return checked_args(group.get("inputs") if isinstance(group, dict) else group,
                                f"{path}: get_input_group({index})")
        groups = call_input_groups(module, path)
        if index >= len(groups):
            raise TaskError(f"{path}: get_input_groups() now returns {len(groups)} groups; "
                            f"the task was loaded with {len(task.groups)}")
        return groups[index][1]
    return call_get_args(module, path)


def tensor_args(task: Task, raw: Sequence[Any]) -> list[torch.Tensor]:
    """The tensors among `raw`, in order: the task's inputs."""
    if not task.forward_args:
        return _tensor_list(list(raw), f"{task.source_path}: get_inputs()")
    if len(raw) != len(task.forward_args):
        raise TaskError(f"{task.source_path}: the inputs have {len(raw)} arguments, the task was "
                        f"loaded with {len(task.forward_args)}")
    return flat_tensors([a for a, spec in zip(raw, task.forward_args, strict=True)
                         if spec.kind in ("tensor", "tensors")])


def assemble_call(task: Task, tensors: Sequence[torch.Tensor]) -> list[Any]:
    """The positional forward() arguments: `tensors` (the inputs) interleaved with the task's
    recorded scalars, lists and Nones (the values the kernel receives as attrs)."""
    if not task.forward_args:
        return list(tensors)
    it = iter(tensors)
    call: list[Any] = []
    for spec in task.forward_args:
        if spec.kind == "tensor":
            call.append(next(it))
        elif spec.kind == "tensors":
            count = spec.value if isinstance(spec.value, int) else 0
            call.append([next(it) for _ in range(count)])
        elif spec.kind == "list":
            call.append(list(spec.value) if isinstance(spec.value, tuple) else spec.value)
        else:  # scalar or none
            call.append(spec.value)
    return call


def trial_kinds(task: Task) -> tuple[str, ...]:
    """Every distribution `build_inputs` accepts for `task`: the value distributions, then the
    coverage trials the task declares valid (tasks/special.py), then its named edge cases."""
    cov = task.coverage
    extra = (("special_values",) if cov.special_values else ()) + (("ties",) if cov.ties else ())
    return DISTRIBUTIONS + extra + tuple(cov.edge_cases)


def build_inputs(task: Task, sizes: Mapping[str, int] | None = None, seed: int = 0,
                 distribution: str = "default") -> list[torch.Tensor]:
    """Fresh, contiguous input tensors for `task` at `sizes` (defaults where omitted).

    Deterministic in (`sizes`, `seed`, `distribution`); leaves the global RNG untouched.
    Raises `TaskError` if the file's inputs do not match the task's declared shapes and dtypes.
    Only tensors are returned (non-tensor forward arguments travel as attrs); for a task with
    input groups, the tensors of group `task.group_index` (0 by default). `distribution` is one of
    `trial_kinds(task)`: ``special_values`` and ``ties`` start from ``normal`` inputs and transform
    the inputs the task declares (tasks/special.py); an edge case name goes to ``make_inputs``.
    """
    from sagekernel.tasks import confine
    from sagekernel.tasks.special import BASE_DISTRIBUTION, make_ties, plant_special_values, redraw_structured

    if (child := confine.child_for(task)) is not None:  # the harness judging: in the task sandbox
        return confine.build_inputs(child, task, sizes, seed, distribution)

    if distribution not in trial_kinds(task):
        raise TaskError(f"unknown input distribution {distribution!r} for task {task.name} "
                        f"(known: {', '.join(trial_kinds(task))})")
    cov = task.coverage
    edge = distribution in cov.edge_cases
    base = BASE_DISTRIBUTION if distribution in ("special_values", "ties") else distribution
    full = full_sizes(task, sizes)
    module = task_module(task)
    path = task.source_path
    make = getattr(module, "make_inputs", None)
    with bound_sizes(module, task.binding(full)), torch.random.fork_rng(devices=[]):
        seed_cpu(seed)
        if callable(make) and not task.groups:
            gen = torch.Generator().manual_seed(seed)
            try:
                raw = make(dict(full), gen, base)
            except Exception as exc:
                raise TaskError(f"{path}: make_inputs() raised {type(exc).__name__}: {exc}") from exc
            inputs = tensor_args(task, _tensor_list(raw, f"{path}: make_inputs()")
                                 if not task.forward_args else list(raw))
        elif edge:
            raise TaskError(f"{path}: edge case {distribution!r} needs make_inputs()")
        else:
            inputs = tensor_args(task, raw_args(task, module))
            if base != "default":
                gen = torch.Generator().manual_seed((seed + _REDRAW_SALT) % (2**63))
                keep = structured_inputs(module)
                domains = cov.structured_domains
                inputs = [t if not t.is_floating_point() or (spec.name in keep and spec.name not in domains)
                          else redraw_structured(t, domains[spec.name], gen) if spec.name in keep
                          else sample_tensor(t.shape, t.dtype, gen, base)
                          for spec, t in zip(task.inputs, inputs, strict=False)]
        if distribution in ("special_values", "ties"):
            gen = torch.Generator().manual_seed((seed + 2 * _REDRAW_SALT) % (2**63))
            inputs = [plant_special_values(t, cov.special_values[spec.name], gen)
                      if distribution == "special_values" and spec.name in cov.special_values
                      else make_ties(t, gen) if distribution == "ties" and spec.name in cov.ties else t
                      for spec, t in zip(task.inputs, inputs, strict=False)]
    inputs = [t.detach().clone().contiguous() for t in inputs]
    check_tensors(task, task.inputs, inputs, full, f"inputs for distribution {distribution!r}")
    return inputs
