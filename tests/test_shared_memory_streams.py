"""Two `sage run` processes on DIFFERENT operators (disjoint parts of the e2e suite) learning into one
PostgreSQL memory at once, each with its own workspace and its own scripted model server:

- the live utilities and counters equal a serial replay of the committed credits in commit order
  (memory/merge.py `fold` over the provenance rows), and every item's chain of credits is unbroken
  (each change starts from the u the previous one left: no lost update);
- the lessons stream A distilled are retrieved (and adopted, so credited) by stream B, and their
  provenance names both runs;
- the resident set is within its budget, equals the consolidated items and is disjoint from what
  a retrieval returns;
- UGC's distinct-operator count |O_m| of the item both streams adopted holds operators of both;
- `sage report` reads each run against the shared memory it recorded (not its empty workspace
  memory), and refuses a --memory that is not the memory the run learned into.

The streams are ordered at two points only (each model server polls the memory): B's first reply
waits until A's lessons are in the memory, so B's later retrievals must see them, and A's first
reply on its second operator waits until B committed an episode, so the commits interleave (A A B
B A A); everything else runs concurrently."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from openai_server import OpenAITestServer
from pg_support import pg_server, pg_url  # noqa: F401  (fixtures)
from sagekernel.memory.backend import connect_memory
from sagekernel.memory.io import load_seed
from sagekernel.memory.merge import fold
from sagekernel.memory.policies import make_policy
from sagekernel.memory.records import ItemState, MemoryConfig
from sagekernel.memory.store import Store
from sagekernel.records import EpisodeKind
from sagekernel.runner.run import run
from test_cli_values import invoke
from test_e2e_run import ANCHOR, SEED, TASKS, Script, config

pytestmark = pytest.mark.postgres

OPS_A, OPS_B = ("e2e_double", "e2e_add"), ("e2e_negate",)  # by level: e2e_double (L1) before e2e_add (L2)
#: Stream A's lessons (it distils after fixing e2e_double's broken first round).
SYNTAX = "every statement needs valid C syntax"


#: What each stream's model waits for, once, in the shared memory: B's first reply for A's lessons
#: (distilled and committed when A's first operator ends); A's first reply on its second operator
#: for B's first committed episode. An operator's two episodes commit when it ends, so the commits
#: go A A B B A A (and neither wait depends on the other: no deadlock).
A_DISTILLED = "SELECT count(*) FROM item_history WHERE kind = 'distilled' AND run_id = 'stream-a'"
B_COMMITTED = "SELECT count(*) FROM memory_episodes WHERE run_id = 'stream-b'"


class SharingScript(Script):
    """test_e2e_run's scripted model, which also adopts stream A's syntax lesson, and holds one
    reply (the first, or the first on operator `before_op`) until `wait_for` counts a row in the
    memory."""

    def __init__(self, url: str, wait_for: str, *, before_op: str | None = None) -> None:
        super().__init__()
        self.url, self.wait_for, self.before_op = url, wait_for, before_op
        self.waited = False

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        whole = "\n".join(m["content"] for m in body["messages"])
        if not self.waited and (self.before_op is None or f"# Operator: {self.before_op} " in whole):
            self._wait()
        reply = super().__call__(body)
        text = reply["content"]
        for item_id, title in re.findall(r"^\[E(\d+)\] (.*?) \(type:", prompt, re.M):
            if SYNTAX in title:
                text = re.sub(rf"^- E{item_id}: .*$", f"- E{item_id}: ADOPTED - the syntax error here",
                              text, flags=re.M)
        return {**reply, "content": text}

    def _wait(self) -> None:
        conn = connect_memory(self.url)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not conn.execute(self.wait_for).fetchone()[0]:
                time.sleep(0.2)
        finally:
            conn.close()
        self.waited = True


def _suite(root: Path, ops: tuple[str, ...]) -> Path:
    root.mkdir()
    for op in ops:
        shutil.copy(TASKS / f"{op}.py", root / f"{op}.py")
    return root


def _stream(cfg: Any) -> None:
    assert run(cfg).status == "finished"


def test_two_streams_on_different_operators_share_one_memory(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    seed = tmp_path / "seed.jsonl"
    seed.write_text("\n".join(json.dumps(s) for s in SEED) + "\n")
    conn = connect_memory(pg_url)
    load_seed(conn, seed)
    ctx = multiprocessing.get_context("fork")
    suites = {"stream-a": _suite(tmp_path / "suite-a", OPS_A),
              "stream-b": _suite(tmp_path / "suite-b", OPS_B)}
    with OpenAITestServer(fallback=SharingScript(pg_url, B_COMMITTED, before_op=OPS_A[1])) as srv_a, \
            OpenAITestServer(fallback=SharingScript(pg_url, A_DISTILLED)) as srv_b:
        cfgs = [config(tmp_path / name, srv).model_copy(update={"memory": pg_url, "run_id": name,
                                                                 "suite": str(suites[name])})
                for name, srv in (("stream-a", srv_a), ("stream-b", srv_b))]
        procs = [ctx.Process(target=_stream, args=(c,)) for c in cfgs]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0, 0]
    store = Store(conn)
    order = store.episode_order()
    assert {op for _, op in order} == set(OPS_A + OPS_B) and len(order) == store.clock() == 2 * 3
    assert [r for r, _ in order] == ["stream-a"] * 2 + ["stream-b"] * 2 + ["stream-a"] * 2  # interleaved
    items = {m.id: m for m in store.all_items()}

    # (1) the live memory equals a serial replay, in commit order, of the committed credits
    by_hash = {m.content_hash: m for m in items.values()}
    replayed = fold(store.events(), MemoryConfig().eta_min)
    assert replayed, "no credit was committed"
    for digest, r in replayed.items():
        m = by_hash[digest]
        assert (round(m.u, 12), m.n_upd, m.n_ret, m.n_ado, m.adopting_ops, m.retrieving_ops) == \
            (round(r.u, 12), r.n_upd, r.n_ret, r.n_ado, r.adopting_ops, r.retrieving_ops), m.title
    for m in items.values():
        credits = [h for h in store.history(m.id) if h.kind == "credited"]
        for before, after in itertools.pairwise(credits):
            assert after.u_before == pytest.approx(before.u_after, abs=1e-12), m.title  # no lost update
        assert m.n_upd == len(credits)

    # (2) A's lessons were retrieved and adopted by B; their provenance names both runs
    distilled = [h for i in items for h in store.history(i) if h.kind == "distilled"]
    created = {h.item_id for h in distilled}
    assert created and {h.origin.run_id for h in distilled} == {"stream-a"}
    syntax = next(i for i in created if SYNTAX in items[i].title)
    b_rounds = store.run_adoptions("stream-b")
    assert any(a.item_id == syntax and a.adopted for a in b_rounds)
    runs = {h.origin.run_id for h in store.history(syntax)}
    assert runs == {"stream-a", "stream-b"}
    assert set(OPS_B) <= items[syntax].adopting_ops
    code, out, err = invoke(["memory", "show", str(syntax), "--memory", pg_url])
    assert code == 0 and "stream-a" in out and "stream-b" in out, err

    # (3) the resident set: within budget, the consolidated items, disjoint from what is retrieved
    hot = {i for i, m in items.items() if m.state is ItemState.CONSOLIDATED}
    snap = store.latest_snapshot()
    assert hot and snap is not None and {e.id for e in snap.hot_entries} == hot  # the anchor rule
    assert snap.total_tokens <= snap.budget
    probe = make_policy("sage", conn, run_id="probe", frozen=True, embedder=None)
    found = {r.item_id for r in probe.retrieve("elementwise kernel loop C syntax", operator="e2e_probe",
                                                category="elementwise", episode=EpisodeKind.CORR, k=50)}
    assert found and not found & hot
    assert (created - hot) <= found  # A's lessons are retrievable by any learner of this memory

    # (4) UGC's distinct-operator count sees both streams' operators
    anchor = next(m for m in items.values() if m.title == ANCHOR)
    assert set(OPS_A) & anchor.adopting_ops and set(OPS_B) & anchor.adopting_ops
    assert len(anchor.adopting_ops) == 3

    # (5) `sage report` reads each run against the memory it recorded
    reports = {}
    for name in ("stream-a", "stream-b"):
        code, out, err = invoke(["report", str(tmp_path / name), "--json"])
        assert code == 0, err
        mem = json.loads(out)["runs"][0]["memory"]
        assert mem["where"].startswith("postgresql://") and mem["n_items"] == len(items)
        reports[name] = mem
    assert reports["stream-a"]["provenance"]["created"] == len(created)
    assert reports["stream-b"]["provenance"]["created"] == 0
    assert reports["stream-b"]["provenance"]["credited_of_other_runs"] >= 1
    assert reports["stream-b"]["n_retrievals"] == len(b_rounds)
    code, _, err = invoke(["report", str(tmp_path / "stream-a"), "--memory", str(tmp_path / "stream-a")])
    assert code == 2 and "learned into the shared memory" in err
    code, _, err = invoke(["report", str(tmp_path / "stream-a"), "--memory", pg_url])
    assert code == 0, err
