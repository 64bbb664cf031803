"""A scripted coding-agent session with `sage mcp`, over stdio with the MCP SDK's own client.

    python examples/mcp/scripted_session.py [--workspace DIR] [--json]

No hosted model is needed: the "agent" below is a script playing the generator and optimizer
skills on one operator (examples/mcp/tasks/scale2.py), and the server's own model calls
(distilling a lesson, abstracting a rule) come from the scripted model examples/mcp/distiller.json.
The session shows every tool: an evaluation refused by the trace-completeness hook, a crash,
`diagnose` naming the faulting line, a correct kernel, an optimisation round, the finish. It
prints the exchange (arguments and results, long texts cut); --json prints it whole.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

from sagekernel.mcp_server.client import ToolClient, connect_stdio

HERE = Path(__file__).resolve().parent
SIG = "#include <stdint.h>\nvoid sage_kernel(const float* restrict x, float* restrict out, int64_t N) {\n"
OOB = SIG + "  for (int64_t i = 0; i <= N; ++i)\n    out[i] = 2.0f * x[i];\n}\n"
RIGHT = SIG + "  for (int64_t i = 0; i < N; ++i)\n    out[i] = 2.0f * x[i];\n}\n"
UNROLLED = SIG + (
    "  int64_t i = 0;\n  for (; i + 4 <= N; i += 4) {\n"
    "    out[i] = 2.0f * x[i]; out[i + 1] = 2.0f * x[i + 1];\n"
    "    out[i + 2] = 2.0f * x[i + 2]; out[i + 3] = 2.0f * x[i + 3];\n  }\n"
    "  for (; i < N; ++i) out[i] = 2.0f * x[i];\n}\n"
)


def decide(items: list[dict[str, Any]], adopt: str) -> list[dict[str, Any]]:
    """Adopt the experiences whose title mentions `adopt`; decline the rest, with reasons."""
    return [
        {
            "id": i["id"],
            "decision": "ADOPTED" if adopt.lower() in i["title"].lower() else "NOT ADOPTED",
            "rationale": f"applies: {adopt}"
            if adopt.lower() in i["title"].lower()
            else "not relevant to this kernel",
        }
        for i in items
    ]


async def session(args: list[str]) -> list[dict[str, Any]]:
    async with connect_stdio(args) as client:
        await script(client)
        return client.transcript


async def script(c: ToolClient) -> None:
    await c.call("status")
    await c.call("open_operator")
    got = await c.call("retrieve")
    # The hook: an evaluation without a decision for every retrieved experience is refused.
    await c.call("evaluate", code=OOB, adoptions=decide(got["items"], "loop")[:1])
    verdict = await c.call(
        "evaluate", code=OOB, adoptions=decide(got["items"], "loop"), diagnosis="first attempt: one flat loop"
    )
    if not verdict["verdict"]["correct"]:
        await c.call("diagnose", code=OOB)  # no round spent: names the faulting line and buffer
    got = await c.call("retrieve")
    await c.call(
        "evaluate",
        code=RIGHT,
        adoptions=decide(got["items"], "bound"),
        diagnosis="the loop ran to i == N; stop at N - 1",
    )
    got = await c.call("retrieve")
    done = await c.call(
        "evaluate",
        code=UNROLLED,
        adoptions=decide(got["items"], "unroll") + decide(
            [{"id": r["id"], "title": r["rule"]} for r in got["resident_rules"]], "unroll"),
        diagnosis="unroll by four",
    )
    if not done["operator_finished"]:
        await c.call("finish_operator")
    await c.call("status")


def short(value: Any, limit: int = 160) -> Any:
    if isinstance(value, str):
        flat = value.replace("\n", "\\n")
        return flat if len(flat) <= limit else flat[:limit] + f"... ({len(value)} chars)"
    if isinstance(value, dict):
        return {k: short(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [short(v, limit) for v in value[:6]] + (
            [f"... ({len(value)} items)"] if len(value) > 6 else []
        )
    return value


def memory_after(ws: Path) -> dict[str, Any]:
    """What the run left in the workspace (read-only): the items it touched, its tool-call log."""
    conn = sqlite3.connect(f"file:{ws / 'sage.db'}?mode=ro", uri=True)
    try:
        items = [
            dict(zip(("id", "title", "u", "n_ret", "n_ado", "state", "source"), r, strict=True))
            for r in conn.execute(
                "SELECT id, title, round(u, 4), n_ret, n_ado, state, source FROM items "
                "WHERE n_ret > 0 OR source = 'distilled' ORDER BY id"
            )
        ]
        calls = [f"{t}:{s}" for t, s in conn.execute("SELECT tool, status FROM tool_calls ORDER BY id")]
        model = [p for (p,) in conn.execute("SELECT json_extract(tags_json, '$.purpose') FROM exchanges")]
    finally:
        conn.close()
    return {"items": items, "tool_calls": calls, "server_model_calls": model}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, default=None, help="default: a fresh temporary one")
    parser.add_argument("--json", action="store_true", help="print the whole transcript as JSON")
    opts = parser.parse_args()
    ws = opts.workspace or Path(tempfile.mkdtemp(prefix="sage-mcp-demo-"))
    ws.mkdir(parents=True, exist_ok=True)
    args = [
        "--workspace",
        str(ws),
        "--suite",
        str(HERE / "tasks"),
        "--target",
        "cpu",
        "--method",
        "sage",
        "--budget",
        "3",
        "-k",
        "3",
        "--embedder",
        "none",
        "--model",
        f"scripted:{HERE / 'distiller.json'}",
        "--harness",
        "held_out_shape=false",
        "--harness",
        "iters=20",
        "--harness",
        "rounds=4",
        "--new",
    ]
    transcript = anyio.run(session, args)
    after = memory_after(ws)
    if opts.json:
        print(json.dumps({"transcript": transcript, "workspace": after}, indent=2, default=str))
    else:
        print(f"$ sage mcp {' '.join(args)}\n")
        for n, entry in enumerate(transcript, 1):
            print(f"[{n}] -> {entry['tool']}({json.dumps(short(entry['arguments'], 60))})")
            mark = "ERROR " if entry["is_error"] else ""
            print(f"    <- {mark}{json.dumps(short(entry['result']), indent=2)}\n".replace("\n", "\n    "))
        print(f"workspace: {ws}\nmemory after the operator (items retrieved or distilled):")
        for item in after["items"]:
            print(
                f"  E{item['id']:<3} u={item['u']:+.4f} retrieved {item['n_ret']}x adopted {item['n_ado']}x "
                f"{item['state']:<12} {item['source']:<9} {item['title']}"
            )
        print(f"tool-call log: {', '.join(after['tool_calls'])}")
        print(f"the server's own model calls: {', '.join(after['server_model_calls']) or 'none'}")
    if opts.workspace is None and not opts.json:
        print(
            "(inspect it with `sage report WORKSPACE` and `sage log tools -w WORKSPACE`; "
            "it is a temporary directory)"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
