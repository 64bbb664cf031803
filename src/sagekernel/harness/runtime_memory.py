"""Input integrity checked from outside the candidate's interpreter.

A Python runtime computes `inputs_changed` with code in the candidate's own interpreter, which the
candidate can reach (a self-restoring monkey-patch leaves no trace in the integrity snapshot). So
when a runtime keeps its inputs in host memory (the Triton interpreter), it also reports where each
input's guarded region lies (`done.in_spans`: address and length, guard bytes included) and keeps
the round's buffers alive until the next control byte. After `round_end`, while the runtime waits,
the harness reads those regions through /proc/PID/mem and compares them with the bytes it sent
itself and with the guard pattern: the comparison runs in the harness, on the harness's own copy.

A forged address (a pristine copy elsewhere) still needs code that rewrites the loop, which the
integrity snapshot watches; device memory (GPUs) is not readable this way and is not checked here.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The runtime's guard pattern (targets/devloop/loop.py: GUARD_VALUE around every buffer).
GUARD_VALUE = 0xA5


@dataclass(frozen=True)
class MemoryFinding:
    input_index: int
    what: str  # "input" or "guard"
    offset: int  # first differing byte, in the input (or in the guarded region for guards)


def read_region(pid: int, address: int, length: int) -> bytes | None:
    """`length` bytes of process `pid` at `address`, or None when they cannot be read."""
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(address)
            data = mem.read(length)
    except (OSError, OverflowError, ValueError):
        return None
    return data if len(data) == length else None


def compare_region(region: bytes, expected: bytes) -> tuple[str, int] | None:
    """("input" | "guard", offset) of the first difference between a guarded region and the input
    bytes the harness sent, or None when both the input and its guards are intact."""
    guard = (len(region) - len(expected)) // 2
    if guard < 0 or 2 * guard + len(expected) != len(region):
        return ("guard", 0)
    data = region[guard : guard + len(expected)]
    if data != expected:
        return ("input", next(i for i, (a, b) in enumerate(zip(data, expected, strict=True)) if a != b))
    for offset in [*range(guard), *range(guard + len(expected), len(region))]:
        if region[offset] != GUARD_VALUE:
            return ("guard", offset)
    return None


def check_inputs(pid: int, spans: list[list[int]], expected: list[bytes]) -> MemoryFinding | str | None:
    """The first input (in order) whose memory differs from what the harness sent; None when all
    are intact; a string saying why the check could not be made."""
    if len(spans) != len(expected):
        return f"{len(spans)} input regions reported for {len(expected)} inputs"
    for i, ((address, length), want) in enumerate(zip(spans, expected, strict=True)):
        region = read_region(pid, int(address), int(length))
        if region is None:
            return f"input {i}'s memory could not be read"
        found = compare_region(region, want)
        if found is not None:
            return MemoryFinding(i, found[0], found[1])
    return None


__all__ = ["GUARD_VALUE", "MemoryFinding", "check_inputs", "compare_region", "read_region"]
