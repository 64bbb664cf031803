"""The parent's clock and stops for the supervised CPU driver (harness/charging.py, supervised.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from sagekernel.harness.charging import Baseline, Charge, charge
from sagekernel.harness.supervised import buffer_size, first_difference, layout, wait_stopped
from sagekernel.harness.wire import Arg

BASE = Baseline(calls_ns=50_000, window_ns=5_000.0, outside_ns=100_000)


def first(claimed: list[int], calls_ns: int, outside_ns: int, threads: int = 1) -> Charge:
    """A first measurement's round: one stop after 10 calls."""
    windows: list[int | None] = [None] * len(claimed)
    return charge(
        claimed,
        calls_ns,
        windows,
        outside_ns,
        BASE,
        threads=threads,
        per_call_clock=False,
        noise_factor=0.5,
        noise_ns=100_000,
    )


def test_a_low_claim_never_lowers_the_charge() -> None:
    # 10 calls claimed at 60% of what the process was accounted between the stops
    ch = first([600_000] * 10, 10_050_000, 100_000)
    assert ch.kernel_ns == 10_000_000 and ch.charged_ns == 10_000_000
    honest = first([1_100_000] * 10, 10_050_000, 0)
    assert honest.charged_ns == 11_000_000  # a larger claim counts (wall clock above on-CPU time)


def test_work_outside_the_windows_is_charged_beyond_the_noise() -> None:
    quiet = first([100] * 10, 60_000, 240_000)
    assert quiet.outside_excess_ns == 0  # within 1.5 x the no-op's share + 0.1 ms
    busy = first([100] * 10, 60_000, 5_250_000)
    assert busy.outside_excess_ns == 5_000_000 and busy.charged_ns == 5_010_000
    two = first([100] * 10, 60_000, 5_250_000, threads=2)
    assert two.charged_ns == 2_505_000  # a thread budget of T: T threads accrue T times the wall time


def test_the_quarantine_clock_is_per_call() -> None:
    windows: list[int | None] = [105_000, 5_000, 4_000, 205_000]
    ch = charge(
        [1, 1, 1, 1], 0, windows, 0, BASE, threads=1, per_call_clock=True, noise_factor=0.5, noise_ns=0
    )
    assert ch.kernel_ns == 300_000 and ch.charged_ns == 300_000


def test_layout_matches_the_driver_geometry() -> None:
    args = [Arg("in", 10), Arg("out", 4096), Arg("i64", value=3)]
    spots = layout(1 << 20, 2, args, 2)
    assert buffer_size(10) == 3 * 4096 and buffer_size(4096) == 3 * 4096 and buffer_size(4097) == 4 * 4096
    assert [s.base for row in spots for s in row] == [(1 << 20) + 4096 * k for k in (2, 5, 8, 11)]
    assert spots[1][1].data == spots[1][1].base + 4096


def test_first_difference() -> None:
    a = bytes(range(256)) * 40
    assert first_difference(a, a) == -1
    b = bytearray(a)
    b[7777] ^= 1
    assert first_difference(a, bytes(b)) == 7777


def test_a_stop_is_observed_only_when_every_thread_stopped() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert not wait_stopped(proc.pid, time.monotonic() + 0.05)  # sleeping is not stopped
        os.kill(proc.pid, signal.SIGSTOP)
        assert wait_stopped(proc.pid, time.monotonic() + 5.0)
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()
        assert not wait_stopped(proc.pid, time.monotonic() + 0.05)  # gone
    finally:
        proc.kill()
        proc.wait()
