"""RunConfig builds what the run uses: `-k` and `--max-new-items` reach the memory as given, and a
result-changing environment variable is part of the run's identity (a resume under another value
is refused, naming it)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer

from openai_server import OpenAITestServer
from sagekernel import db
from sagekernel.cli import app
from sagekernel.cli.run_options import run_config
from sagekernel.memory.policies import make_policy
from sagekernel.memory.records import Item
from sagekernel.memory.store import Store
from sagekernel.records import AdoptionDecision, EpisodeKind, EpisodeTrace, ItemDraft, RoundTrace
from sagekernel.runner.config import RunConfig
from sagekernel.runner.run import RunNotFound, run
from test_e2e_run import Script, SimulatedCrash, config, prepare

#: Options of the commands that are not RunConfig knobs.
COMMAND_OWN = {"run": ("as_json",), "mcp": ("http", "port", "token_env")}


def cli_config(command: str, argv: list[str]) -> RunConfig:
    """The RunConfig `sage COMMAND ARGV` builds (parsed by the real command, not run)."""
    group = typer.main.get_command(app)
    cmd = group.get_command(typer.Context(group), command)  # type: ignore[attr-defined]
    params = dict(cmd.make_context(command, list(argv)).params)
    for own in COMMAND_OWN[command]:
        params.pop(own)
    fixed = {"driver": "mcp", "progress": False} if command == "mcp" else {}
    return run_config(params, **fixed)


def _many_items(ws: Path, n: int) -> Any:
    conn = db.connect(ws)
    store = Store(conn)
    with db.transaction(conn):
        for i in range(n):
            store.insert_item(Item(id=0, title=f"Reduction tip number {i}", type="performance",
                                   category="reduction", error_message=f"slow reduction variant {i}",
                                   wrong_code="", correct_code=""))
    return conn


@pytest.mark.parametrize("command", ["run", "mcp"])
@pytest.mark.parametrize("k", [5, 20, 30])
def test_k_items_are_retrieved_as_the_option_says(tmp_path: Path, command: str, k: int) -> None:
    cfg = cli_config(command, ["--workspace", str(tmp_path), "-k", str(k), "--embedder", "none"])
    assert cfg.agent_config().k == k  # what the agent asks for each round
    conn = _many_items(tmp_path, 100)
    policy = make_policy("sage", conn, run_id="r", embedder=None, config=cfg.memory_config())
    got = policy.retrieve("reduction", operator="op", category="reduction", episode=EpisodeKind.CORR, k=k)
    assert len(got) == k  # the pool is 3k (spec §3); it was fixed at 15, so k=20 and k=30 gave 15


def test_the_writer_keeps_as_many_new_items_as_distillation_was_asked_for(tmp_path: Path) -> None:
    cfg = cli_config("run", ["--workspace", str(tmp_path), "--max-new-items", "5"])
    assert cfg.max_new_items == cfg.memory_config().max_new_items == 5
    conn = _many_items(tmp_path, 3)
    policy = make_policy("sage", conn, run_id="r", embedder=None, config=cfg.memory_config())
    got = policy.retrieve("reduction", operator="op", category="reduction", episode=EpisodeKind.CORR, k=3)
    rt = RoundTrace(round=1, episode=EpisodeKind.CORR, retrieved=got,
                    decisions=[AdoptionDecision(r.item_id, False, "not needed") for r in got], correct=True)
    trace = EpisodeTrace("op", "Elementwise", 1, EpisodeKind.CORR, [rt], success=True)
    subjects = ["division", "transpose", "prefetch", "alignment", "unrolling", "fusion"]
    drafts = [ItemDraft(f"Lesson about {s}", "performance", "Elementwise", f"{s} problem in loop {s}",
                        f"bad_{s}();", f"good_{s}();", "op") for s in subjects]
    before = Store(conn).count()
    policy.learn(trace, drafts)
    assert Store(conn).count() - before == 5  # the writer capped at 3 whatever distillation was asked


def test_a_resume_under_another_result_changing_environment_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SAGE_TASK_MAX_BYTES", raising=False)
    ws = tmp_path / "ws"
    prepare(ws)
    with OpenAITestServer(fallback=Script()) as server:
        cfg = config(ws, server).model_copy(update={"limit": 1})

        def die(trace: Any, last: bool) -> None:
            raise SimulatedCrash("the process dies after the first episode")

        with pytest.raises(SimulatedCrash):
            run(cfg, after_episode=die)
        started = cfg.key()

        monkeypatch.setenv("SAGE_TASK_MAX_BYTES", "1000000")
        with pytest.raises(RunNotFound, match=r"SAGE_TASK_MAX_BYTES: the run has it unset, this process has "
                                              r"'1000000'"):
            run(RunConfig(workspace=ws, resume=True, progress=False))
        moved = config(ws, server).model_copy(update={"limit": 1})
        assert moved.environment == {"SAGE_TASK_MAX_BYTES": "1000000"}
        assert moved.key() != started  # the same command under it is another run, not this one
        with pytest.raises(RunNotFound, match="started under another environment"):
            run(moved.model_copy(update={"run_id": run_id_of(ws)}))

        monkeypatch.delenv("SAGE_TASK_MAX_BYTES")
        assert run(RunConfig(workspace=ws, resume=True, progress=False)).status == "finished"


def run_id_of(ws: Path) -> str:
    row = db.connect(ws).execute("SELECT run_id FROM runs").fetchone()
    return str(row[0])


def test_the_environment_is_stored_and_an_empty_one_leaves_the_key_as_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from sagekernel.runner.environment import result_variables

    for name in result_variables("ascendc"):
        monkeypatch.delenv(name, raising=False)
    assert "environment" not in RunConfig().key()  # keys recorded before it existed still match
    monkeypatch.setenv("SAGE_NO_EMBED", "1")
    monkeypatch.setenv("SAGE_ASCENDC_SOC", "Ascend910B2")
    cpu, npu = RunConfig(), RunConfig(target="ascendc")
    assert cpu.environment == {"SAGE_NO_EMBED": "1"}  # an Ascend variable does not touch a CPU run
    assert npu.environment == {"SAGE_ASCENDC_SOC": "Ascend910B2", "SAGE_NO_EMBED": "1"}
    assert cpu.key()["environment"] == {"SAGE_NO_EMBED": "1"}
    stored = RunConfig.model_validate(cpu.stored())
    monkeypatch.delenv("SAGE_NO_EMBED")
    assert stored.environment == {"SAGE_NO_EMBED": "1"}  # a stored run keeps what it started with
    assert stored.environment_change() == [
        "SAGE_NO_EMBED: the run has '1', this process has it unset (1 turns dense retrieval off "
        "(memory/embedding.py))"]


#: SAGE_* strings in the source that are names inside task files, not environment variables.
TASK_FILE_NAMES = {"SAGE_TASK", "SAGE_ASCENDC"}


def test_every_sage_variable_the_source_reads_is_classified() -> None:
    """A variable that changes results must be part of the run's identity: each SAGE_* string in
    src/ is either a result-changing variable (runner/environment.py) or listed as changing none."""
    import ast

    from sagekernel.runner import environment

    src = Path(__file__).parents[1] / "src/sagekernel"
    found = {node.value for path in src.rglob("*.py")
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and re.fullmatch(r"SAGE_[A-Z0-9_]+", node.value)}
    classified = {*environment.COMMON, *environment.NO_RESULT, *TASK_FILE_NAMES,
                  *(v for table in environment.BY_TARGET.values() for v in table)}
    assert found - classified == set()
    assert {"SAGE_NO_EMBED", "SAGE_TASK_MAX_BYTES", "SAGE_ASCENDC_SOC"} <= found  # the scan sees them
