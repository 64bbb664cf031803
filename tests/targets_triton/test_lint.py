"""The Triton AST lint: what host code may do, and that correct kernels pass it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel.targets.triton.lint import lint_source
from sagekernel.targets.triton.lint_tables import REASONS

SUITE = Path(__file__).resolve().parents[2] / "src" / "sagekernel" / "tasks" / "suite"
KERNELS = sorted(SUITE.rglob("*.triton.py"))

HEAD = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n"


def rules(src: str) -> set[str]:
    return {f.rule for f in lint_source(HEAD + src)}


@pytest.mark.parametrize("path", KERNELS, ids=[p.stem for p in KERNELS])
def test_hand_written_kernels_are_clean(path: Path) -> None:
    assert lint_source(path.read_text()) == []


def test_every_finding_has_a_reason_line() -> None:
    assert all(reason and "\n" not in reason for reason in REASONS.values())
    findings = lint_source(
        HEAD + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x.exp()\n"
    )
    assert findings and findings[0].reason.startswith(REASONS["tensor_method"]) and findings[0].line == 8


ALLOWED = """
@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4)], key=["n"])
@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        b, d = x.shape
        n = x.numel()
        rows = x.shape[0] * 2 + 1
        flat = x.reshape(-1).contiguous()
        out = torch.empty((b, d), dtype=x.dtype, device=x.device)
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
        with torch.no_grad():
            k[grid](flat, out, n)
        if x.dim() == 2 and d > 1024:
            k[(rows,)](flat, out, n)
        return out
"""


def test_allocation_views_shapes_and_launches_are_allowed() -> None:
    assert rules(ALLOWED) == set()


@pytest.mark.parametrize(
    ("code", "rule"),
    [
        ("return torch.exp(x)", "torch_compute"),
        ("return torch.nn.functional.relu(x)", "functional"),
        ("return x + 1", "tensor_math"),
        ("return -x", "tensor_math"),
        ("return x[x > 0]", "tensor_math"),
        ("x[0] = 1\n        return x", "tensor_write"),
        ("return x.clamp(0)", "tensor_method"),
        ("return x.to(torch.float16)", "tensor_method"),
        ("return float(x.sum())", "tensor_method"),
        ("v = x.item()\n        return x", "host_readback"),
        ("return Model()(x)", "reference"),
        ("return eval('x')", "builtin"),
        ("return x.__class__", "dunder"),
        ("f = torch.exp\n        return f(x)", "module_alias"),
        ("torch.exp = None\n        return x", "monkey_patch"),
        ("self.cache = x\n        return x", "module_state"),
        ("return torch.ops.aten.exp(x)", "torch_namespace"),
        ("triton.testing.do_bench(lambda: 0)\n        return x", "triton_host_api"),
        ("import os\n        return x", "import"),
    ],
)
def test_forward_rule(code: str, rule: str) -> None:
    src = f"class ModelNew(nn.Module):\n    def forward(self, x):\n        {code}\n"
    assert rule in rules(src), lint_source(HEAD + src)


def test_helpers_called_with_tensors_are_checked() -> None:
    src = (
        "def helper(t, n):\n    return t * n\n\n\ndef grid(n):\n    return (n + 127) // 128\n\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        g = grid(x.numel())\n"
        "        return helper(x, g)\n"
    )
    found = lint_source(HEAD + src)
    assert [f.rule for f in found] == ["tensor_math"] and found[0].line == 7


def test_module_level_and_class_rules() -> None:
    assert "no_model_new" in rules("x = 1\n")
    assert "class_base" in rules("class ModelNew(torch.Tensor):\n    pass\n")
    assert "module_code" in rules("class ModelNew(nn.Module):\n    pass\n\n\nprint('hi')\n")
    assert "decorator" in rules(
        "import functools\n\n\nclass ModelNew(nn.Module):\n"
        "    @functools.lru_cache\n    def forward(self, x):\n        return x\n"
    )
    assert "syntax" in {f.rule for f in lint_source("def (:\n")}
