"""Two `sage run` streams, each with its own workspace, learning into one PostgreSQL memory at once
(the scripted model and real harness of test_e2e_run.py): both finish, `sage report` reads each, and
`sage memory show` of the item both adopted lists the credits of both runs."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from openai_server import OpenAITestServer
from pg_support import pg_server, pg_url  # noqa: F401  (fixtures)
from sagekernel import db
from sagekernel.memory.backend import connect_memory
from sagekernel.memory.io import load_seed
from sagekernel.memory.store import Store
from sagekernel.runner.run import run
from test_cli_values import invoke
from test_e2e_run import ANCHOR, SEED, Script, config

pytestmark = pytest.mark.postgres


def _stream(cfg) -> None:  # type: ignore[no-untyped-def]
    assert run(cfg).status == "finished"


def test_two_streams_learn_into_one_shared_memory(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    seed = tmp_path / "seed.jsonl"
    seed.write_text("\n".join(json.dumps(s) for s in SEED) + "\n")
    conn = connect_memory(pg_url)
    load_seed(conn, seed)
    ctx = multiprocessing.get_context("fork")
    with OpenAITestServer(fallback=Script()) as srv:
        cfgs = [config(tmp_path / name, srv).model_copy(update={"memory": pg_url, "run_id": name})
                for name in ("team-a", "team-b")]
        procs = [ctx.Process(target=_stream, args=(c,)) for c in cfgs]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=600)
    assert [p.exitcode for p in procs] == [0, 0]
    store = Store(conn)
    runs = {r[0] for r in conn.execute("SELECT DISTINCT run_id FROM memory_episodes").fetchall()}
    assert runs == {"team-a", "team-b"} and store.clock() == 2 * 2 * 3  # 3 operators × corr/opt each
    anchor = next(m for m in store.all_items() if m.title == ANCHOR)
    credited = {h.origin.run_id for h in store.history(anchor.id) if h.kind == "credited"}
    assert credited == {"team-a", "team-b"}
    assert anchor.n_upd == sum(1 for h in store.history(anchor.id) if h.kind == "credited")
    code, out, err = invoke(["memory", "show", str(anchor.id), "--memory", pg_url])
    assert code == 0 and "team-a" in out and "team-b" in out, err
    for name in ("team-a", "team-b"):
        code, out, err = invoke(["report", str(tmp_path / name), "--json"])
        assert code == 0, err
        assert not Store(db.connect(tmp_path / name, readonly=True)).count()  # its own memory stayed empty
