"""How many refusals each tree's reply parser records as ADOPTED (issue 25).

Draws N refusal lines from the generator of tests/test_agent_decisions.py (negations, booleans,
tables, markdown, labels, other languages' "no", a canonical-looking line whose rationale says
no; deterministic), then parses each with `parse_reply` of every tree given, in a subprocess
whose PYTHONPATH is that tree's src:

    python3 benchmarks/bench_refusals.py --tree before=<old checkout>/src --tree after=src -n 3000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_READ = r"""
import json, sys
from sagekernel.agent.protocol import parse_reply
K = "#include <stdint.h>\nvoid sage_kernel(const float* x, float* y, int64_t N) { y[0] = x[0]; }\n"
lines = json.load(sys.stdin)
bad = [l for l in lines if parse_reply(l + "\n```c\n" + K + "```", shown_items=[5, 7], shown_rules=[2],
                                       language="c").decisions.get(5, (False, ""))[0] is True]
print(json.dumps({"adopted": len(bad), "examples": sorted(set(bad))[:5]}))
"""


def refusal_lines(n: int) -> list[str]:
    sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]
    from hypothesis import HealthCheck, given, settings

    import test_agent_decisions as t

    lines: list[str] = []

    @settings(max_examples=n, suppress_health_check=list(HealthCheck), database=None, derandomize=True)
    @given(t.refusals())
    def collect(line: str) -> None:
        lines.append(line)

    collect()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a tree's src")
    parser.add_argument("-n", type=int, default=3000, help="refusals to draw")
    opts = parser.parse_args()
    lines = refusal_lines(opts.n)
    print(f"{len(lines)} refusals drawn ({len(set(lines))} distinct)")
    for spec in opts.tree:
        name, _, path = spec.partition("=")
        done = subprocess.run([sys.executable, "-c", _READ], input=json.dumps(lines), text=True,
                              capture_output=True, env={"PYTHONPATH": str(Path(path).resolve())}, check=True)
        got = json.loads(done.stdout)
        print(f"{name}: {got['adopted']} recorded ADOPTED; e.g. {got['examples']}")


if __name__ == "__main__":
    main()
