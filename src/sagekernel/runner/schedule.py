"""Stream schedules: the fixed order in which a run processes its operators (spec §1, §10).

    given              the suite's own order
    by-level           L1 -> L2 -> L3 (stable within a level)
    level:N            only the level-N operators, in suite order
    interleave:L2,L3   a fixed round-robin over the listed levels (L2, L3, L2, L3, ...), each level
                       in suite order; when a level runs out the others continue. Levels not
                       listed are left out (spec §4.4 "L2+L3 mixed (fixed interleaving)").
    levels:L2,L3       the listed levels one after the other (all of L2, then all of L3), each in
                       suite order; others left out (spec §4.4 "L2→L3").

The plan is written to `run_stream` when a run starts, so a resumed run keeps the same order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sagekernel.errors import SageError
from sagekernel.tasks.task import Task

SCHEDULES = ("given", "by-level", "level:N", "interleave:L2,L3", "levels:L2,L3")


class ScheduleError(SageError):
    """A schedule string that cannot be parsed, or that selects no operator."""


def _level(text: str, spec: str) -> int:
    match = re.fullmatch(r"\s*[Ll]?(\d+)\s*", text)
    if not match:
        raise ScheduleError(f"bad level {text!r} in schedule {spec!r}; write e.g. level:2 or "
                            "interleave:L2,L3")
    return int(match.group(1))


def check_schedule(schedule: str) -> None:
    """Refuse a schedule string that `order` could not parse, without any task (`sage mcp` checks
    its options before it serves, and loads the suite later)."""
    order([], schedule, allow_empty=True)


def order(tasks: Sequence[Task], schedule: str, *, allow_empty: bool = False) -> list[Task]:
    """The operators of `tasks` in the order `schedule` prescribes."""
    spec = schedule.strip()
    kind, _, arg = spec.partition(":")
    if kind == "given" and not arg:
        planned = list(tasks)
    elif kind == "by-level" and not arg:
        planned = sorted(tasks, key=lambda t: t.level)  # sorted() is stable
    elif kind == "level" and arg:
        wanted = _level(arg, spec)
        planned = [t for t in tasks if t.level == wanted]
    elif kind in ("interleave", "levels") and arg:
        levels = [_level(part, spec) for part in arg.split(",") if part.strip()]
        if len(levels) != len(set(levels)) or not levels:
            raise ScheduleError(f"schedule {spec!r} must list distinct levels, e.g. {kind}:L2,L3")
        queues = [[t for t in tasks if t.level == lv] for lv in levels]
        planned = []
        if kind == "levels":
            planned = [t for queue in queues for t in queue]
        while kind == "interleave" and any(queues):
            for queue in queues:
                if queue:
                    planned.append(queue.pop(0))
    else:
        raise ScheduleError(f"unknown schedule {schedule!r}; choose one of {', '.join(SCHEDULES)}")
    if not planned and not allow_empty:
        levels_present = sorted({t.level for t in tasks})
        raise ScheduleError(f"schedule {schedule!r} selects no operator (the suite has levels "
                            f"{levels_present})")
    return planned
