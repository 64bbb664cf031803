"""End to end on the Triton target: `sage run --target triton --device interpreter` with a scripted
model behind the local OpenAI-protocol server (issue 10). The kernel really runs, on the Triton
interpreter, inside the sandbox; the verdict says it was emulated and not timed."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from openai_server import OpenAITestServer
from sagekernel import db
from sagekernel.runner.config import RunConfig
from sagekernel.runner.run import run

pytest.importorskip("triton", reason="triton is not installed (pip install '.[triton]')")

TASK = Path(__file__).parent / "e2e_tasks" / "e2e_negate.py"
GOOD = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def negate(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, -tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        negate[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
'''
# The first round's kernel lets torch compute the operator: the lint must refuse it.
CHEAT = GOOD.replace("        out = torch.empty_like(x)\n", "        return torch.neg(x)\n")


def reply(body: dict[str, Any]) -> dict[str, Any]:
    messages = body["messages"]
    last = messages[-1]["content"]
    if "curating a memory" in last:
        return {"content": "NO LESSONS"}
    prompt = next(m["content"] for m in messages if m["role"] == "user")
    items = re.findall(r"^\[E(\d+)\]", prompt, re.M)
    if last.startswith("Your reply is incomplete"):
        return {"content": "\n".join(f"- E{i}: NOT ADOPTED - not needed" for i in items)}
    n = int(re.search(r"\(round (\d+) of", prompt).group(1))  # type: ignore[union-attr]
    decisions = "\n".join(f"- E{i}: NOT ADOPTED - not needed here" for i in items)
    code = CHEAT if n == 1 else GOOD
    return {"content": f"DIAGNOSIS: a masked elementwise kernel.\nADOPTION:\n{decisions}\n"
                       f"```python\n{code}```\n"}


def test_a_triton_stream_runs_on_the_interpreter(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(TASK, suite / TASK.name)
    ws = tmp_path / "ws"
    with OpenAITestServer(fallback=reply) as server:
        summary = run(RunConfig(
            workspace=ws, suite=str(suite), target="triton", device="interpreter",
            model=f"openai:test-model@{server.base_url}", method="sage", budget=2, k=5, embedder="none",
            harness={"trials": 1, "variant_trials": 1, "held_out_shape": False}, progress=False,
        ))
    assert summary.done == 1 and summary.correct == 1, summary.message
    conn = db.connect(ws, readonly=True)
    try:
        rows = conn.execute("SELECT trace_json FROM round_traces ORDER BY round")
        traces = [json.loads(t) for (t,) in rows]
    finally:
        conn.close()
    first, second = traces[0]["verdict"], traces[1]["verdict"]
    assert first["stage"] == "lint" and "torch" in first["message"]
    assert second["stage"] == "ok" and second["correct"] and second["evidence"] == "emulated"
    assert second["candidate_ms"] is None and "not timed" in second["message"]
