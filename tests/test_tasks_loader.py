"""Task loader: validation, per-file problems, KernelBench inference, inputs and references."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from sagekernel.errors import TaskError
from sagekernel.tasks.inputs import DISTRIBUTIONS, tolerance_scale
from sagekernel.tasks.loader import build_inputs, load_dir, load_task, make_model, reference_outputs
from sagekernel.tasks.suites import SUITE_ROOT, find_task, load_suite


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Small reference ops: one intra-op thread avoids OpenMP spin-wait storms on a shared 2-core box."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


GOOD = '''
import torch
import torch.nn as nn

B = 8
D = 12
SCALE = 2.0

SAGE_TASK = {
    "name": "scaled_add", "level": 1, "category": "math",
    "inputs": {"x": ["B", "D"], "y": ["D"]},
    "outputs": {"out": ["B", "D"]},
    "attrs": {"scale": 2.0},
    "sizes": {"B": 8, "D": 12},
    "variants": [{"B": 3}, {"D": 7}],
    "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        return x * self.scale + y


def get_inputs():
    return [torch.randn(B, D), torch.randn(D)]


def get_init_inputs():
    return [SCALE]
'''


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def variant_of(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new)


# ----------------------------------------------------------------------------- good files

def test_good_file_loads_with_observed_dtypes_and_kernel(tmp_path: Path) -> None:
    path = write(tmp_path, "scaled_add.py", GOOD)
    (tmp_path / "scaled_add.cpu.c").write_text("/* kernel */\n")
    task = load_task(path)
    assert task.name == "scaled_add" and task.level == 1 and task.category == "math"
    assert [(s.name, s.dims, s.dtype) for s in task.inputs] == [("x", ("B", "D"), "float32"),
                                                                ("y", ("D",), "float32")]
    assert [(s.name, s.dims, s.dtype) for s in task.outputs] == [("out", ("B", "D"), "float32")]
    assert task.attrs == {"scale": 2.0} and task.sizes == {"B": 8, "D": 12}
    assert task.dtype == "float32" and task.atol == 1e-5
    assert task.reference_kernels == {"cpu": tmp_path / "scaled_add.cpu.c"}
    assert task.all_shapes() == [{"B": 8, "D": 12}, {"B": 3, "D": 12}, {"B": 8, "D": 7}]


def test_same_stem_in_two_folders_does_not_share_module_state(tmp_path: Path) -> None:
    a = write(tmp_path / "level1", "op.py", variant_of(GOOD, '"name": "scaled_add"', '"name": "op_a"'))
    b = write(tmp_path / "level2", "op.py", variant_of(
        variant_of(GOOD, '"name": "scaled_add"', '"name": "op_b"'), "return x * self.scale + y",
        "return x * self.scale - y"))
    ta, tb = load_task(a), load_task(b)
    x = build_inputs(ta, seed=3)
    assert torch.allclose(reference_outputs(ta, x)[0] - reference_outputs(tb, x)[0], 2 * x[1].expand(8, 12))


# ----------------------------------------------------------------------------- broken files

BROKEN = {
    "import_error.py": ("import torch\nraise RuntimeError('boom at import')\n",
                        "import failed: RuntimeError: boom"),
    "syntax_error.py": ("def f(:\n    pass\n", "import failed: SyntaxError"),
    "no_get_inputs.py": (GOOD.replace("def get_inputs():", "def other_inputs():"), "defines no get_inputs"),
    "crashing_reference.py": (GOOD.replace("return x * self.scale + y", "raise ValueError('ref bug')"),
                              "forward() raised ValueError: ref bug"),
    "size_mismatch.py": (GOOD.replace("D = 12\n", "D = 13\n"), "size D defaults to 12"),
    "size_not_module_int.py": (
        GOOD.replace('"sizes": {"B": 8, "D": 12}', '"sizes": {"B": 8, "D": 12, "Z": 4}'),
        "size symbol 'Z' has no module-level int"),
    "undeclared_dim.py": (GOOD.replace('"y": ["D"]', '"y": ["E"]'), "size symbol 'E', which is not declared"),
    "input_count.py": (GOOD.replace('"inputs": {"x": ["B", "D"], "y": ["D"]}', '"inputs": {"x": ["B", "D"]}'),
                       "get_inputs() returns 2 tensors but SAGE_TASK['inputs'] declares 1"),
    "output_count.py": (
        GOOD.replace('"outputs": {"out": ["B", "D"]}', '"outputs": {"o1": ["B", "D"], "o2": ["D"]}'),
        "forward() returns 1 tensors but SAGE_TASK['outputs'] declares 2"),
    "wrong_shape.py": (GOOD.replace('"y": ["D"]', '"y": ["B"]'), "y has shape (12,), expected (8,)"),
    "unknown_dtype.py": (GOOD.replace('"atol": 1e-5', '"dtype": "float8", "atol": 1e-5'),
                         "SAGE_TASK['dtype'] 'float8' is not supported"),
    "complex_input.py": (GOOD.replace("torch.randn(D)]", "torch.randn(D, dtype=torch.complex64)]"),
                         "input 'y' has unsupported dtype complex64"),
    "bad_level.py": (GOOD.replace('"level": 1', '"level": 4'), "SAGE_TASK['level'] must be 1, 2 or 3"),
    "bad_variant.py": (GOOD.replace('{"D": 7}', '{"Q": 7}'), "variant 1 overrides unknown size symbol 'Q'"),
    "variant_ignored.py": (
        GOOD.replace("torch.randn(B, D), torch.randn(D)]", "torch.randn(8, D), torch.randn(D)]"),
        "variant 0"),
    "bad_attr.py": (GOOD.replace('"attrs": {"scale": 2.0}', '"attrs": {"scale": [2.0]}'),
                    "attr 'scale' must be an int or float scalar"),
    "unknown_key.py": (GOOD.replace('"atol": 1e-5', '"atl": 1e-5'), "unknown keys ['atl']"),
    "c_keyword.py": (GOOD.replace('"y": ["D"]', '"int": ["D"]'), "'int' is a reserved word"),
    "name_clash.py": (GOOD.replace('"outputs": {"out": ["B", "D"]}', '"outputs": {"x": ["B", "D"]}'),
                      "names used twice"),
    "not_tensors.py": (GOOD.replace("return [torch.randn(B, D), torch.randn(D)]", "return [1, 2]"),
                       "get_inputs() item 0 is a int"),
}


def test_broken_files_are_reported_per_file_and_good_ones_still_load(tmp_path: Path) -> None:
    folder = tmp_path / "tasks"
    write(folder / "level1", "scaled_add.py", GOOD)
    for name, (text, _) in BROKEN.items():
        write(folder / "level1", name, text)
    write(folder / "level1", "_helper.py", "raise RuntimeError('never imported')\n")
    report = load_dir(folder)
    assert [t.name for t in report.tasks] == ["scaled_add"]
    by_file = {p.path.name: p.message for p in report.problems}
    assert set(by_file) == set(BROKEN), "every broken file, and only those, is reported"
    for name, (_, expected) in BROKEN.items():
        message = by_file[name]
        assert name in message, f"{name}: message does not name the file: {message}"
        assert expected in message, f"{name}: {message!r} does not say {expected!r}"
    assert not report.ok


def test_duplicate_task_names_are_a_problem(tmp_path: Path) -> None:
    write(tmp_path / "level1", "a.py", GOOD)
    write(tmp_path / "level2", "b.py", GOOD)
    report = load_dir(tmp_path)
    assert len(report.tasks) == 1
    assert "already used" in report.problems[0].message and "b.py" in report.problems[0].message


def test_load_task_raises_task_error_naming_file(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.py", BROKEN["crashing_reference.py"][0])
    with pytest.raises(TaskError, match=r"bad\.py: the reference forward\(\) raised"):
        load_task(path)
    with pytest.raises(TaskError, match="no such task file"):
        load_task(tmp_path / "missing.py")


# ----------------------------------------------------------------------------- inference

RELU_KB = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Simple model that performs a ReLU activation."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


batch_size = 16
dim = 1000


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

ARGMAX_KB = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.argmax(x, dim=self.dim)


batch_size = 16
dim1 = 64
dim2 = 64
channels = 3


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2), torch.randn(channels, 5)][:1]


def get_init_inputs():
    return [1]
'''


GEMM_KB = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, x):
        return self.leaky_relu(self.gemm(x) * self.multiplier)


batch_size = 32
in_features = 48
out_features = 48
multiplier = 2.0
negative_slope = 0.1


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, multiplier, negative_slope]
'''


def test_inference_finds_sizes_that_only_reach_the_model(tmp_path: Path) -> None:
    task = load_task(write(tmp_path / "level2", "12_Gemm_Multiply_LeakyReLU.py", GEMM_KB))
    assert task.name == "gemm_multiply_leaky_relu"
    assert task.inputs[0].dims == ("batch_size", "in_features")
    assert task.outputs[0].dims == ("batch_size", "out_features"), "out_features equals in_features in value"
    assert task.sizes == {"batch_size": 32, "in_features": 48, "out_features": 48}
    assert task.attrs == {"multiplier": 2.0, "negative_slope": 0.1}, "size-following init args are not attrs"
    model = make_model(task, {"out_features": 5})
    (out,) = reference_outputs(task, build_inputs(task, {"out_features": 5}, seed=0), {"out_features": 5})
    assert out.shape == (32, 5) and model.gemm.out_features == 5
    mse = load_task(write(tmp_path / "level1", "94_MSELoss.py", RELU_KB))
    assert mse.name == "mse_loss" and mse.category == "loss"


def test_plain_kernelbench_file_is_inferred(tmp_path: Path) -> None:
    task = load_task(write(tmp_path / "level1", "19_ReLU.py", RELU_KB))
    assert task.name == "relu" and task.level == 1 and task.category == "activation"
    assert [(s.name, s.dims, s.dtype) for s in task.inputs] == [("in0", ("batch_size", "dim"), "float32")]
    assert [(s.name, s.dims) for s in task.outputs] == [("out0", ("batch_size", "dim"))]
    assert task.sizes == {"batch_size": 16, "dim": 1000}
    assert task.atol == task.rtol == 1e-2 and task.variants == [] and task.attrs == {}
    assert task.description == "Simple model that performs a ReLU activation."
    # inferred size symbols really drive the shapes
    assert build_inputs(task, {"dim": 7}, seed=0)[0].shape == (16, 7)


def test_inference_disambiguates_equal_sizes_and_finds_attrs(tmp_path: Path) -> None:
    task = load_task(write(tmp_path / "2", "51_Argmax_over_a_dimension.py", ARGMAX_KB))
    assert task.level == 2 and task.name == "argmax_over_a_dimension" and task.category == "reduction"
    assert task.inputs[0].dims == ("batch_size", "dim1", "dim2")
    assert task.outputs[0].dims == ("batch_size", "dim2"), "argmax over dim 1 keeps dim2, not dim1"
    assert task.outputs[0].dtype == "int64"
    assert task.attrs == {"dim": 1}
    assert "channels" not in task.sizes, "ints the shapes do not depend on are not size symbols"


def test_inference_constant_dims_and_missing_level(tmp_path: Path) -> None:
    text = RELU_KB.replace("torch.randn(batch_size, dim)", "torch.randn(batch_size, 3, dim)")
    task = load_task(write(tmp_path / "level3", "rgb.py", text))
    assert task.inputs[0].dims == ("batch_size", "C3", "dim") and task.sizes["C3"] == 3
    # Without a level folder the task still loads, as level 1, and the record says so.
    plain = load_task(write(tmp_path / "misc", "relu.py", RELU_KB))
    assert plain.level == 1 and "level 1 assumed" in plain.layout_note


# ----------------------------------------------------------------------------- inputs

@pytest.fixture(scope="module")
def builtin() -> dict[str, object]:
    return {t.name: t for t in load_suite("builtin")}


def test_variants_change_input_shapes(builtin: dict) -> None:
    for name in ("rms_norm", "gather", "attention", "grouped_matmul"):
        task = builtin[name]
        seen = set()
        for sizes in task.all_shapes():
            inputs = build_inputs(task, sizes, seed=0)
            shapes = tuple(tuple(t.shape) for t in inputs)
            assert shapes == tuple(tuple(sizes[d] for d in s.dims) for s in task.inputs)
            seen.add(shapes)
        assert len(seen) == len(task.all_shapes()), f"{name}: some variant does not change the shapes"


def test_build_inputs_is_seeded_and_leaves_global_rng_alone(builtin: dict) -> None:
    task = builtin["layer_norm"]
    state = torch.get_rng_state()
    a = build_inputs(task, seed=5, distribution="normal")
    b = build_inputs(task, seed=5, distribution="normal")
    c = build_inputs(task, seed=6, distribution="normal")
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])
    assert all(t.is_contiguous() for t in a)


def test_distributions_differ_in_shape_of_values(builtin: dict) -> None:
    task = builtin["abs"]
    x = {d: build_inputs(task, seed=1, distribution=d)[0].double() for d in DISTRIBUTIONS}
    assert float(x["uniform"].abs().max()) <= 1.0
    assert float(x["large_magnitude"].abs().mean()) > 300
    lo, hi = float(x["offset_uniform"].min()), float(x["offset_uniform"].max())
    assert lo >= -4 and hi <= 8.01 and 0.5 <= hi - lo <= 4.01
    h = x["heavy_tailed"]
    kurtosis = float(((h - h.mean()) ** 4).mean() / h.var() ** 2)
    assert kurtosis > 6, "heavy-tailed inputs need much fatter tails than a normal (kurtosis 3)"
    assert abs(float(x["normal"].std()) - 1) < 0.05
    assert tolerance_scale([x["large_magnitude"]]) > 300 and tolerance_scale([x["normal"]]) == 1.0
    with pytest.raises(TaskError, match="unknown input distribution 'cauchy'"):
        build_inputs(task, seed=0, distribution="cauchy")


def test_distributions_keep_integer_inputs_valid_and_domains(builtin: dict) -> None:
    for dist in DISTRIBUTIONS:
        _, index = build_inputs(builtin["gather"], {"D": 33}, seed=2, distribution=dist)
        assert index.dtype == torch.int64 and int(index.min()) >= 0 and int(index.max()) < 33
        *_, sizes = build_inputs(builtin["grouped_matmul"], seed=2, distribution=dist)
        assert int(sizes.sum()) == 256 and int(sizes.min()) >= 0
        (s,) = build_inputs(builtin["sqrt"], seed=2, distribution=dist)
        assert float(s.min()) >= 0
        (f,) = build_inputs(builtin["isinf"], seed=2, distribution=dist)
        assert bool(torch.isinf(f).any()) and bool(torch.isnan(f).any()) and bool(torch.isfinite(f).any())
        xe, ye = build_inputs(builtin["equal"], seed=2, distribution=dist)
        assert 0.3 < float((xe == ye).double().mean()) < 0.7
        _, weight = build_inputs(builtin["rms_norm"], seed=2, distribution=dist)
        # a structured input with a declared domain is re-drawn within it (tasks/coverage.py)
        published = build_inputs(builtin["rms_norm"], seed=2)[1]
        assert torch.equal(weight, published) is (dist == "default"), "structured input re-drawn"
        assert torch.equal(weight, build_inputs(builtin["rms_norm"], seed=2, distribution=dist)[1])


def test_make_inputs_hook_is_used_with_sizes(tmp_path: Path) -> None:
    text = GOOD + '''

def make_inputs(sizes, gen, distribution):
    return [torch.full((sizes["B"], sizes["D"]), 7.0), torch.ones(sizes["D"]) * len(distribution)]
'''
    task = load_task(write(tmp_path, "hooked.py", text))
    x, y = build_inputs(task, {"D": 5}, seed=0, distribution="normal")
    assert x.shape == (8, 5) and float(x[0, 0]) == 7.0 and float(y[0]) == len("normal")


# ----------------------------------------------------------------------------- reference

CANCEL = '''
import torch
import torch.nn as nn

N = 64
SAGE_TASK = {
    "name": "cancel", "level": 1, "category": "math",
    "inputs": {"x": ["N"]}, "outputs": {"out": ["N"]}, "sizes": {"N": 64},
    "variants": [{"N": 5}], "atol": 1e-6, "rtol": 1e-6,
}


class Model(nn.Module):
    def forward(self, x):
        y = (x + 1e8) - 1e8
        x.mul_(0)
        return y


def get_inputs():
    return [torch.rand(N) + 0.25]


def get_init_inputs():
    return []
'''


def test_reference_runs_in_float64_and_never_touches_inputs(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, "cancel.py", CANCEL))
    x = build_inputs(task, seed=0)
    kept = x[0].clone()
    (out,) = reference_outputs(task, x)
    assert torch.equal(x[0], kept), "the reference mutated the caller's inputs"
    assert out.dtype == torch.float32
    assert torch.allclose(out, kept, atol=1e-6), "float64 keeps x exactly"
    native = load_task(write(tmp_path / "n", "cancel.py",
                             CANCEL.replace('"atol": 1e-6', '"fp64_reference": False, "atol": 1e-6')))
    (rough,) = reference_outputs(native, build_inputs(native, seed=0))
    assert not torch.allclose(rough, kept, atol=1e-3), "float32 loses x to cancellation"


def test_reference_sizes_and_model(builtin: dict) -> None:
    task = builtin["arange"]
    (out,) = reference_outputs(task, [], {"N": 1531})
    assert out.shape == (1531,) and float(out[1] - out[0]) == pytest.approx(0.37, abs=1e-6)
    model = make_model(task, {"N": 7})
    assert not model.training and model().shape == (7,)
    norm = builtin["rms_norm"]
    inputs = build_inputs(norm, {"B": 7, "D": 1531}, seed=1)
    (ref,) = reference_outputs(norm, inputs)  # sizes read off the input shapes
    assert ref.shape == (7, 1531)
    with pytest.raises(TaskError, match="unknown size symbol 'Q'"):
        build_inputs(norm, {"Q": 3}, seed=0)


# ----------------------------------------------------------------------------- suites and CLI

def test_named_suites(builtin: dict) -> None:
    assert [t.name for t in load_suite("demo")] == ["abs", "swish", "rms_norm"]
    for level in (1, 2, 3):
        tasks = load_suite(f"level{level}")
        assert tasks and {t.level for t in tasks} == {level}
    assert len(builtin) >= 40
    assert len(load_suite(SUITE_ROOT / "level3")) == len(load_suite("level3"))
    with pytest.raises(TaskError, match=r"unknown suite 'nope'.*builtin, demo, level1, level2, level3"):
        load_suite("nope")
    with pytest.raises(TaskError, match=r"no task named 'nope'.*rms_norm"):
        find_task("nope", "demo")


def test_strict_suite_lists_problems(tmp_path: Path) -> None:
    write(tmp_path / "level1", "ok.py", GOOD)
    write(tmp_path / "level1", "broken.py", BROKEN["import_error.py"][0])
    with pytest.raises(TaskError, match=r"(?s)1 task file\(s\).*broken\.py"):
        load_suite(tmp_path)
    assert [t.name for t in load_suite(tmp_path, strict=False)] == ["scaled_add"]


def test_cli_list_show_check(tmp_path: Path) -> None:
    from sagekernel.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["tasks", "list", "--suite", "demo", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["tasks"]
    assert [r["name"] for r in rows] == ["abs", "swish", "rms_norm"]
    assert rows[2]["inputs"][1] == {"name": "weight", "dims": ["D"], "dtype": "float32", "origin": "input"}

    result = runner.invoke(app, ["tasks", "list", "--suite", "level3"])
    assert result.exit_code == 0 and "grouped_matmul" in result.output and "level" in result.output

    result = runner.invoke(app, ["tasks", "show", "rms_norm"])
    assert result.exit_code == 0, result.output
    assert "sage_kernel" in result.output and "class Model" in result.output and "eps" in result.output

    result = runner.invoke(app, ["tasks", "show", "swish", "--json"])
    shown = json.loads(result.output)
    assert shown["cpu_contract"].count("float beta") == 1 and "SAGE_TASK" in shown["source"]

    write(tmp_path / "level1", "ok.py", GOOD)
    result = runner.invoke(app, ["tasks", "check", str(tmp_path)])
    assert result.exit_code == 0 and "1 loaded, 0 with problems" in result.output
    write(tmp_path / "level1", "bad_level.py", BROKEN["bad_level.py"][0])
    result = runner.invoke(app, ["tasks", "check", str(tmp_path), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["tasks"] == ["scaled_add"]
    assert report["problems"][0]["path"].endswith("bad_level.py")
    assert "must be 1, 2 or 3" in report["problems"][0]["message"]
