"""What a supervised round of the native driver is charged: the parent's clock, pure functions.

The parent measures, for every round of the candidate's process (harness/supervised.py):
the kernel-accounted run time between the stop before its first call and the stop after its last
(`calls_ns`, or one window per call in the quarantine's layout), and everything the process ran
since the previous round's last stop (`outside_ns`). The driver's own no-op round, as many calls,
measured the same way, is the part that is not the kernel's. Every nanosecond the process runs
falls in one of those intervals, so nothing it does at any moment escapes the charge; the driver's
claimed per-call clock can only raise it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Baseline:
    """The no-op round: the driver's own run time in the call window and outside it."""

    calls_ns: int  # between the two stops, all the no-op calls
    window_ns: float  # per call (quarantine layout: the upper quartile of the per-call windows, so
    # that the stops' jitter is not charged to a fast honest kernel as its own time)
    outside_ns: int  # one round's share outside the windows (its preparation and its reports)


@dataclass(frozen=True)
class Charge:
    claimed_ns: int  # the driver's CLOCK_MONOTONIC, summed over the round's calls
    kernel_ns: int  # accounted in the call windows, less the no-op's
    outside_excess_ns: int  # accounted outside the windows beyond the no-op's share and noise
    charged_ns: float  # what the round counts as (per thread of the budget)

    def record(self, round_index: int) -> dict[str, float | int]:
        return {
            "round": round_index,
            "claimed_ns": self.claimed_ns,
            "kernel_ns": self.kernel_ns,
            "outside_excess_ns": self.outside_excess_ns,
            "charged_ns": round(self.charged_ns),
        }


def baseline(
    calls_ns: int | None, windows: list[int | None], outside_ns: int, after_ns: int, n: int
) -> Baseline:
    known = [w for w in windows if w is not None]
    total = calls_ns or 0
    if len(known) >= 2:
        upper = statistics.quantiles(known, n=4)[2]
    else:
        upper = known[0] if known else total / max(1, n)
    return Baseline(total, upper, outside_ns + after_ns)


def charge(
    claimed: list[int],
    calls_ns: int | None,
    windows: list[int | None],
    outside_ns: int,
    base: Baseline,
    *,
    threads: int,
    per_call_clock: bool,
    noise_factor: float,
    noise_ns: int,
) -> Charge:
    """The round's charged time: the accounted time, or the driver's claim where that is larger
    (a claim can only make a candidate slower). `per_call_clock` (quarantine): the kernel time is
    the sum of the per-call windows, each less the no-op's per-call window."""
    if per_call_clock and windows and all(w is not None for w in windows):
        kernel = sum(max(0.0, float(w) - base.window_ns) for w in windows if w is not None)
    else:
        kernel = max(0.0, float(calls_ns or 0) - base.calls_ns)
    excess = max(0.0, outside_ns - base.outside_ns * (1 + noise_factor) - noise_ns)
    trusted = (kernel + excess) / max(1, threads)
    charged = max(float(sum(claimed)), trusted)
    return Charge(sum(claimed), round(kernel), round(excess), charged)


__all__ = ["Baseline", "Charge", "baseline", "charge"]
