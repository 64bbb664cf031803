"""The harness's judgement of the evidence device runtimes report (harness/runtime_evidence.py):
each class of finding from the frames a runtime sends, and promised evidence that goes missing.
The same judgements run end to end through `harness.evaluate` in tests/targets_triton/."""

from __future__ import annotations

from sagekernel.harness import runtime_evidence as ev
from sagekernel.harness.verdict import Stage

REPORTS = frozenset({"integrity", "threads", "out_meta", "host_guard"})
WHAT = "the kernel"
OUT = [("float32", (4, 8))]


def loaded(base: ev.Baseline, **over: object) -> ev.Finding | None:
    record = {"kind": "loaded", "integrity": [], "threads": 3, "host_guard": True, **over}
    return ev.judge_loaded(record, REPORTS, WHAT, base)


def meta(**over: object) -> dict[str, object]:
    return {"dtype": "float32", "shape": [4, 8], "plain": True, "alias": -1, "storage": 1000, **over}


def test_a_clean_run_has_no_finding() -> None:
    base = ev.Baseline()
    assert loaded(base) is None and base.threads == 3
    assert ev.judge_done({"call": 0, "threads": 3}, REPORTS, WHAT, "call 0", base) is None
    assert ev.judge_outputs({"call": 0, "out_meta": [meta()]}, REPORTS, OUT, WHAT, "call 0", base) is None
    assert (
        ev.judge_outputs({"call": 1, "out_meta": [meta(storage=2000)]}, REPORTS, OUT, WHAT, "c1", base)
        is None
    )
    assert ev.judge_round_end({"round": 0, "integrity": [], "threads": 3}, REPORTS, WHAT, base) is None


def test_replaced_functions_and_changed_flags_are_rejected() -> None:
    found = loaded(ev.Baseline(), integrity=["torch.allclose replaced"])
    assert found and found.stage is Stage.INTEGRITY and found.flag == "runtime_integrity"
    base = ev.Baseline()
    loaded(base)
    found = ev.judge_round_end(
        {"integrity": ["torch.backends.cuda.matmul.allow_tf32 changed: False -> True"], "threads": 3},
        REPORTS,
        WHAT,
        base,
    )
    assert found and found.flag == "runtime_integrity" and "allow_tf32" in found.message


def test_promised_evidence_that_is_missing_is_a_finding() -> None:
    base = ev.Baseline()
    found = ev.judge_loaded({"kind": "loaded", "threads": 3, "host_guard": True}, REPORTS, WHAT, base)
    assert found and found.flag == "evidence_missing" and "integrity" in found.message
    assert loaded(ev.Baseline(), host_guard=False).flag == "evidence_missing"  # type: ignore[union-attr]
    loaded(base)
    assert ev.judge_done({"call": 0}, REPORTS, WHAT, "c0", base).flag == "evidence_missing"  # type: ignore[union-attr]
    # A runtime that promises nothing (the CPU driver) is not asked for it.
    assert ev.judge_loaded({"kind": "loaded"}, frozenset(), WHAT, ev.Baseline()) is None


def test_threads_left_running_are_rejected() -> None:
    base = ev.Baseline()
    loaded(base)
    found = ev.judge_done({"call": 2, "threads": 4}, REPORTS, WHAT, "call 2", base)
    assert found and found.stage is Stage.INTEGRITY and found.flag == "background_threads"
    assert (
        ev.judge_round_end({"integrity": [], "threads": 5}, REPORTS, WHAT, base).flag == "background_threads"
    )  # type: ignore[union-attr]


def test_refused_host_ops_and_launch_errors() -> None:
    base = ev.Baseline()
    found = ev.judge_done(
        {"call": 0, "threads": 1, "refused": ["aten.add.Tensor"]}, REPORTS, WHAT, "c0", base
    )
    assert found and found.flag == "host_compute" and "aten.add.Tensor" in found.message
    found = ev.judge_done({"call": 0, "threads": 1, "status": 700}, REPORTS, WHAT, "c0", base)
    assert found and found.stage is Stage.RUNTIME and found.flag == "launch_error"


def test_subclass_alias_layout_and_cache_of_outputs() -> None:
    cases = {
        "tensor_subclass": meta(plain=False),
        "output_alias": meta(alias=0),
        "output_layout": meta(shape=[8, 4]),
    }
    for flag, m in cases.items():
        found = ev.judge_outputs({"call": 0, "out_meta": [m]}, REPORTS, OUT, WHAT, "c0", ev.Baseline())
        assert found and found.flag == flag, (flag, found)
    not_tensor = ev.judge_outputs(
        {"call": 0, "out_meta": [{"type": "float"}]}, REPORTS, OUT, WHAT, "c0", ev.Baseline()
    )
    assert not_tensor and not_tensor.flag == "output_type"
    assert (
        ev.judge_outputs({"call": 0, "out_meta": []}, REPORTS, OUT, WHAT, "c0", ev.Baseline()).flag
        == "output_count"
    )  # type: ignore[union-attr]
    base = ev.Baseline()
    assert ev.judge_outputs({"call": 0, "out_meta": [meta()]}, REPORTS, OUT, WHAT, "c0", base) is None
    found = ev.judge_outputs({"call": 3, "out_meta": [meta()]}, REPORTS, OUT, WHAT, "c3", base)
    assert found and found.flag == "output_cache"
    # A new round starts a new set of live outputs: the same address is allocator reuse then.
    ev.judge_round_end({"integrity": [], "threads": None}, REPORTS, WHAT, base)
    assert ev.judge_outputs({"call": 0, "out_meta": [meta()]}, REPORTS, OUT, WHAT, "c0", base) is None


def test_inputs_are_compared_in_memory_by_the_harness() -> None:
    """runtime_memory reads a process's memory through /proc/PID/mem and compares it with the
    bytes the harness sent, guards included (here: this process's own buffer)."""
    import ctypes
    import os

    from sagekernel.harness import runtime_memory as rm

    sent = bytes(range(64))
    guard = bytes([rm.GUARD_VALUE]) * 16
    buf = ctypes.create_string_buffer(guard + sent + guard, 96)
    span = [[ctypes.addressof(buf), 96]]
    assert rm.check_inputs(os.getpid(), span, [sent]) is None
    buf[16 + 5] = 0xFF
    found = rm.check_inputs(os.getpid(), span, [sent])
    assert isinstance(found, rm.MemoryFinding) and (found.what, found.offset) == ("input", 5)
    buf[16 + 5] = 5
    buf[90] = 0
    found = rm.check_inputs(os.getpid(), span, [sent])
    assert isinstance(found, rm.MemoryFinding) and found.what == "guard"
    assert isinstance(rm.check_inputs(os.getpid(), [[0, 8]], [b"x" * 8]), str)  # unreadable: says so
