"""The pieces of scripts/npu_check.sh that are Python: the doctor table, the scripted model's reply
for one operator, and the report a user sends back.

    python -m sagekernel.targets.ascendc.npucheck doctor
    python -m sagekernel.targets.ascendc.npucheck script TASK OUT.json   # scripted-model replies
    python -m sagekernel.targets.ascendc.npucheck report LOGDIR          # summary of a check's logs
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from sagekernel.targets.ascendc.availability import doctor

REFERENCE = Path(__file__).resolve().parent / "reference"
TEMPLATES = {"abs": "kernel-only", "mul_sigmoid": "kernel-only", "softmax": "full"}


def doctor_table() -> tuple[str, bool]:
    rows = doctor()
    lines = [f"{'ok ' if ok else 'NO '} {name}: {detail}" for name, ok, detail in rows]
    return "\n".join(lines), all(ok for name, ok, _ in rows if name.startswith("device "))


def scripted_reply(task: str) -> dict[str, object]:
    """A scripted model whose every reply is the hand-written reference operator for `task`, one
    fenced block per contract path (the reply protocol's form)."""
    root = REFERENCE / task
    blocks = [
        f"```cpp {p.relative_to(root).as_posix()}\n{p.read_text(encoding='utf-8')}```"
        for p in sorted(root.rglob("*"))
        if p.suffix in (".cpp", ".h")
    ]
    text = "The reference operator, unchanged.\n\n" + "\n\n".join(blocks)
    return {"replies": [], "fallback": text}


def report(logdir: Path) -> str:
    """What to send back: each step's status line and the lines that say why."""
    out = [f"SAGE npu_check report ({logdir})"]
    for log in sorted(logdir.glob("*.log")):
        text = log.read_text(encoding="utf-8", errors="replace")
        status = (
            (logdir / (log.stem + ".rc")).read_text().strip()
            if (logdir / (log.stem + ".rc")).exists()
            else "?"
        )
        out.append(f"== {log.stem}: exit {status}")
        keep = [
            x
            for x in text.splitlines()
            if re.search(r"passed|failed|error|skipped|verdict|speedup|ok |NO ", x, re.I)
        ]
        out += ["   " + x[:200] for x in keep[-15:]]
        out += ["   " + x for x in launch_gap(text)]
    return "\n".join(out)


def launch_gap(log_text: str) -> list[str]:
    """From a `sage eval --json` log: the host wall time per call above the events (the launch +
    synchronise cost the event/wall check allows, seam.LAUNCH_SYNC_MS["npu"]: a figure taken from
    public numbers until a board measures it -- this line is that measurement)."""
    start = log_text.find("{")
    try:
        verdict = json.JSONDecoder().raw_decode(log_text[start:])[0] if start >= 0 else None
    except ValueError:
        return []
    if not isinstance(verdict, dict):
        return []
    timing = verdict.get("timing")
    if not isinstance(timing, dict) or not timing.get("candidate_round_ms"):
        return []
    wall, rounds = timing.get("candidate_wall_median_ms"), sorted(timing["candidate_round_ms"])
    if not isinstance(wall, int | float):
        return []
    event = rounds[len(rounds) // 2]
    flagged = "event_wall_mismatch" in (verdict.get("flags") or [])
    return [
        f"launch+sync gap: wall {wall:.4f} ms - events {event:.4f} ms = {wall - event:.4f} ms per call "
        f"(allowance {timing.get('launch_sync_allowance_ms')} ms; event_wall_mismatch "
        f"{'RAISED' if flagged else 'not raised'})"
    ]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(__doc__)
        return 2
    if args[0] == "doctor":
        table, ok = doctor_table()
        print(table)
        return 0 if ok else 1
    if args[0] == "script" and len(args) == 3:
        Path(args[2]).write_text(json.dumps(scripted_reply(args[1]), indent=1))
        return 0
    if args[0] == "report" and len(args) == 2:
        print(report(Path(args[1])))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
