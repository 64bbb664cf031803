"""Element-wise comparison of a candidate output against the reference, with messages the model
can act on.

Rules (eval_integrity.md §2 recipe): NaN must sit exactly where the reference has NaN (never a
wildcard); +-Inf must match exactly; finite elements pass when |a - e| <= atol + rtol * |e|, where
atol may be one number or a tensor of one tolerance per element (harness/trials.py: the framework
slack is elementwise); integer and bool outputs must be equal. Where the tolerance is zero (atol and
rtol both 0) floating-point outputs are compared bit for bit, NaN canonicalised (any NaN matches any
NaN) and the sign of zero kept: -0.0 is not +0.0. The first failing element is reported with its index,
expected and actual values; a NaN that is still the harness's fill pattern is called unwritten.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

#: Byte patterns the harness writes into every output before a call (one element each).
SENTINELS: dict[str, bytes] = {
    # quiet NaNs with a payload (little-endian) that arithmetic and the NAN macro never produce
    "float32": bytes.fromhex("a5a5c57f"),
    "float64": bytes.fromhex("a5a5a5a5a5a5f87f"),
    "float16": bytes.fromhex("5a7e"),
    "bfloat16": bytes.fromhex("e57f"),
    "int64": bytes.fromhex("efbeaddeefbeadde"),
    "int32": bytes.fromhex("efbeadde"),
    "int16": bytes.fromhex("efbe"),
    "int8": bytes.fromhex("a5"),
    "uint8": bytes.fromhex("a5"),
    "bool": bytes.fromhex("a5"),
}


@dataclass(frozen=True)
class Mismatch:
    """Why an output failed, for the model."""

    count: int  # failing elements
    total: int
    index: tuple[int, ...]  # first failing element
    expected: str
    actual: str
    detail: str  # tolerance / NaN / sentinel explanation

    def describe(self, output: str) -> str:
        where = "[" + ", ".join(str(i) for i in self.index) + "]"
        return (
            f"output '{output}': {self.count} of {self.total} elements wrong; first at index {where}: "
            f"expected {self.expected}, got {self.actual} ({self.detail})"
        )


def _fmt(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.6g}"


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    idx = []
    for dim in reversed(shape):
        idx.append(flat % dim if dim else 0)
        flat = flat // dim if dim else 0
    return tuple(reversed(idx)) if shape else ()


#: Integer views for bit-for-bit comparison, by element size.
_BITS = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}


def compare(
    actual: torch.Tensor,
    expected: torch.Tensor,
    atol: float | torch.Tensor,
    rtol: float,
    dtype: str,
    raw: bytes | None = None,
) -> Mismatch | None:
    """None if `actual` matches `expected`; `raw` (the output bytes) lets unwritten elements be named."""
    shape = tuple(expected.shape)
    a = actual.reshape(-1)
    e = expected.reshape(-1)
    total = e.numel()
    if a.numel() != total:
        return Mismatch(total, total, (), f"{total} elements", f"{a.numel()}", "wrong element count")
    exact = rtol == 0 and (not bool(atol.any()) if isinstance(atol, torch.Tensor) else atol == 0)
    tol: torch.Tensor | None = None
    if expected.is_floating_point() and exact and a.dtype == e.dtype:
        bits = _BITS[e.element_size()]
        nan_a, nan_e = torch.isnan(a), torch.isnan(e)
        bad = (nan_a != nan_e) | (~nan_e & (a.view(bits) != e.view(bits)))
        detail = ""
    elif (
        a.dtype == e.dtype
        and torch.equal(a, e)
        and not (expected.is_floating_point() and bool(torch.isnan(e).any()))
    ):
        return None  # bit-identical (the common case for exact ops): nothing more to check
    elif not expected.is_floating_point():
        # bool outputs are read as raw bytes (uint8), so anything but 0/1 is wrong
        bad = a.to(torch.int64) != e.to(torch.int64)
        detail = "integer and bool outputs must be exact (bool is one byte, 0 or 1)"
    else:
        # float32 arithmetic suffices for judging 16/32-bit outputs and halves the work on large ones
        work = torch.float64 if expected.dtype == torch.float64 else torch.float32
        ad, ed = a.to(work), e.to(work)
        nan_a, nan_e = torch.isnan(ad), torch.isnan(ed)
        inf_e = torch.isinf(ed)
        finite_e = ~(nan_e | inf_e)
        slack = atol.reshape(-1).to(work) if isinstance(atol, torch.Tensor) else atol
        tol = slack + rtol * ed.abs()
        close = (ad - ed).abs() <= tol
        bad = (nan_a != nan_e) | (inf_e & (ad != ed)) | (finite_e & ~close)
        detail = ""
    count = int(bad.sum())
    if count == 0:
        return None
    first = int(torch.nonzero(bad)[0, 0])
    exp_v, act_v = float(e[first].double()), float(a[first].double())
    if expected.is_floating_point():
        if math.isnan(act_v) and not math.isnan(exp_v):
            detail = "NaN where the reference is a number"
            width = len(SENTINELS[dtype])
            if raw is not None and raw[first * width : (first + 1) * width] == SENTINELS[dtype]:
                detail = "still the NaN the harness writes before the call: this element was never written"
        elif math.isnan(exp_v):
            detail = "the reference is NaN here (NaN inputs must give NaN)"
        elif math.isinf(exp_v) or math.isinf(act_v):
            detail = "infinities must match exactly"
        elif tol is None:
            detail = (
                "the tolerance is zero, so the bits must match"
                + (" (the sign of zero differs)" if exp_v == act_v == 0 else "")
            )
        else:
            here = float(atol.reshape(-1)[first]) if isinstance(atol, torch.Tensor) else atol
            detail = (
                f"|diff| {abs(act_v - exp_v):.3g} > tolerance {float(tol[first]):.3g} "
                f"= atol {here:.3g} (at this element) + rtol {rtol:g}*|expected|"
            )
    elif raw is not None:
        width = len(SENTINELS[dtype])
        if raw[first * width : (first + 1) * width] == SENTINELS[dtype]:
            detail = "still the sentinel the harness writes before the call: this element was never written"
    return Mismatch(count, total, _unravel(first, shape), _fmt(exp_v), _fmt(act_v), detail)


def tensor_from_bytes(raw: bytes, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    if not raw:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)
