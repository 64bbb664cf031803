"""`sage run`: process a stream of operators with one memory method, resumably.

For each operator of the planned stream (runner/schedule.py) the agent runs its trajectory
(agent/loop.py). When the operator has finished, the runner -- the single memory writer --
distils new items from each episode's verified transitions and asks for the rule abstractions
the update needs (all model calls logged, none inside a transaction), then in ONE transaction:
records the operator result first (spec §2 step 6, §10), lets the memory policy learn from each
episode in order, and marks each in `episode_updates`. So no operator is helped by its own
experience, and a run killed at any point (kill -9 included) resumes with nothing lost and
nothing applied twice: finished operators are skipped; a partially processed one restarts from
scratch (its partial round traces replaced) against the memory it first saw.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from sagekernel import db, metrics
from sagekernel.agent.distill import distill, make_rule_abstractor
from sagekernel.agent.exceptions import RunInterrupted
from sagekernel.agent.loop import Agent
from sagekernel.agent.prompt import Prompts
from sagekernel.agent.session import OperatorSession
from sagekernel.agent.state import OperatorOutcome
from sagekernel.candidate import Candidate
from sagekernel.errors import BudgetExhausted, ModelError, SageError, WorkspaceError
from sagekernel.harness.verdict import Verdict
from sagekernel.memory.methods import WRITING_METHODS
from sagekernel.models.base import Message, Model, Reply
from sagekernel.models.exchange_log import ExchangeLog, Spend, exchange_context, run_spend
from sagekernel.protocols import MemoryPolicy, Target
from sagekernel.records import EpisodeTrace, ItemDraft, OperatorResult, RoundTrace
from sagekernel.runner.config import RunConfig, check_device, evaluation_deadline_s
from sagekernel.runner.interrupts import deadline, shield_cleanup, sigterm_as_interrupt
from sagekernel.runner.lock import WorkspaceLock
from sagekernel.runner.progress import Progress, QuietProgress
from sagekernel.runner.schedule import order
from sagekernel.runner.store import PlannedOperator, RunInfo, RunStore, now_iso
from sagekernel.tasks.task import Task

#: Failures that stop the whole run (it stays resumable) rather than one operator: the user or the
#: budget stopped it, the model endpoint is gone, or the workspace cannot be written. Retrying later
#: can succeed, so recording them as an operator's result would lose that operator.
_STOPS_THE_RUN: tuple[type[BaseException], ...] = (BudgetExhausted, ModelError, WorkspaceError, sqlite3.Error,
                                                   MemoryError, RunInterrupted)
_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})


def stops_the_run(exc: BaseException) -> bool:
    """Whether `exc` ends the run (see _STOPS_THE_RUN) instead of only the operator it happened in."""
    if isinstance(exc, _STOPS_THE_RUN):
        return True
    if type(exc).__module__.startswith("psycopg"):  # the shared memory's server or connection failed
        return True
    return isinstance(exc, OSError) and exc.errno in _STORAGE_ERRNOS


class RunNotFound(SageError):
    """--resume or --run-id named a run this workspace does not have (or a mismatching one)."""


@dataclass
class RunSummary:
    run_id: str
    status: str
    workspace: str
    method: str
    model: str
    suite: str
    schedule: str
    budget: int
    operators: int
    done: int
    compiled: int
    correct: int
    cr: float | None  # % of finished operators with a compiled kernel (None: none finished)
    er: float | None  # % of finished operators with a correct kernel
    fast_1: float | None  # % of solved operators faster than the reference
    s_self: float | None  # median T_first / T_best over solved operators
    rounds: int
    prompt_tokens: int
    completion_tokens: int
    resumed: bool = False
    message: str = ""
    results: list[dict[str, Any]] = field(default_factory=list)
    #: The run's whole spend from the exchange log, attempts killed before their operator finished
    #: included (prompt_tokens/completion_tokens above count finished operators only); the same
    #: reading `sage report` shows (models/exchange_log.run_spend).
    spend: Spend = field(default_factory=Spend)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(store: RunStore, info: RunInfo, workspace: Path, *, resumed: bool = False,
              message: str = "") -> RunSummary:
    """The run's figures, computed by the metric functions `sage report` uses (sagekernel/metrics.py)
    over the same readings (RunStore.results, run_spend), so both print the same numbers."""
    results = store.results(info.run_id)
    return RunSummary(
        spend=run_spend(store.conn, info.run_id),
        run_id=info.run_id, status=info.status, workspace=str(workspace), method=info.method,
        model=info.model, suite=info.suite, schedule=info.schedule, budget=info.budget,
        operators=len(store.stream(info.run_id)),
        done=len(results), compiled=sum(1 for r in results if r.compiled or r.correct),
        correct=len(metrics.solved(results)),
        cr=metrics.compilation_rate(results), er=metrics.execution_rate(results),
        fast_1=metrics.fast_p(results, 1.0), s_self=metrics.self_speedup_median(results),
        rounds=sum(r.rounds_used for r in results), prompt_tokens=sum(r.prompt_tokens for r in results),
        completion_tokens=sum(r.completion_tokens for r in results), resumed=resumed, message=message,
        results=[{**asdict(r), "speedup": r.speedup, "self_speedup": r.self_speedup} for r in results])


class _Hooks:
    """The runner's side of one operator: persist rounds, record the result, learn (one writer).

    Learning is deferred until the operator has finished: its episodes (corr, then opt) are
    learned in order, in the transaction that records its result first. So no operator is helped
    by its own experience (architecture.md), and a run killed anywhere inside an operator resumes
    against exactly the memory the operator first saw: nothing of it was applied."""

    def __init__(self, runner: StreamRunner, planned: PlannedOperator, task: Task) -> None:
        self.r, self.planned, self.task = runner, planned, task
        self.pending: list[EpisodeTrace] = []

    def on_round(self, trace: RoundTrace, source: str | None) -> None:
        self.r.store.save_round(self.r.run_id, self.task.name, trace, source)
        self.r.progress.round_done(trace)

    def on_episode(self, trace: EpisodeTrace, outcome: OperatorOutcome, last: bool) -> None:
        r = self.r
        self.pending.append(trace)
        if last:
            self._finish(outcome)
        if r.after_episode is not None:
            r.after_episode(trace, last)

    def _finish(self, outcome: OperatorOutcome) -> None:
        r, name = self.r, self.task.name
        learn = [t for t in self.pending if not r.cfg.frozen
                 and not r.store.episode_applied(r.run_id, name, t.episode.value)]
        # Every model call of the update (distillation, rule abstraction) happens here, before the
        # transaction: each is in the exchange log (resumed spend stays right), no call holds the
        # write lock, and a spent budget (BudgetExhausted) stops the run with nothing applied.
        drafts: dict[str, list[ItemDraft]] = {}
        for trace in learn:
            drafts[trace.episode.value] = []
            if r.cfg.distill and r.cfg.method in WRITING_METHODS:
                with exchange_context(operator=name, episode=trace.episode.value, purpose="distill"):
                    drafts[trace.episode.value], _ = distill(r.ask, r.prompts, self.task, r.target, trace,
                                                             outcome, max_items=r.cfg.max_new_items)
        requests = r.policy.rule_requests([(t, drafts[t.episode.value]) for t in learn])
        with exchange_context(operator=name, purpose="abstract-rule"):
            rules = r.policy.abstract_rules(requests)
        result = outcome.result(r.run_id, self.planned.position)
        with db.transaction(r.conn):  # result first, then each update and its marker: all or nothing
            r.store.insert_result(result)
            for trace in learn:
                r.policy.learn(trace, drafts[trace.episode.value], rules=rules)
                r.store.mark_episode(r.run_id, name, trace.episode.value)
        r.progress.operator_done(result)


class StreamRunner:
    """One `sage run` invocation over an opened workspace (see `run`)."""

    def __init__(self, cfg: RunConfig, conn: sqlite3.Connection, info: RunInfo, model: Model, target: Target,
                 policy: MemoryPolicy, tasks: dict[str, Task], progress: Progress,
                 after_episode: Callable[[EpisodeTrace, bool], None] | None = None) -> None:
        self.cfg, self.conn, self.info, self.model, self.target = cfg, conn, info, model, target
        self.policy, self.tasks, self.progress, self.after_episode = policy, tasks, progress, after_episode
        self.run_id = info.run_id
        self.harness = cfg.harness_config()
        self.store = RunStore(conn)
        self.prompts = Prompts()
        self.agent = Agent(model, target, policy, self._evaluate, cfg.agent_config(), self.prompts,
                           diagnose=self.diagnose if cfg.diagnostics else None)
        self.ask = _asker(model, cfg)

    def _evaluate(self, task: Task, candidate: Candidate) -> Verdict:
        from sagekernel.harness.evaluate import evaluate

        with deadline(evaluation_deadline_s(self.harness), f"evaluating a candidate for {task.name}"):
            return evaluate(task, candidate, self.target, self.harness, device=self.cfg.device)

    def diagnose(self, task: Task, candidate: Candidate) -> str | None:
        """The target's diagnostics for a candidate, as text for the model (harness/diagnose.py)."""
        from sagekernel.harness.diagnose import diagnose

        with deadline(evaluation_deadline_s(self.harness), f"diagnosing a candidate for {task.name}"):
            return diagnose(task, candidate, self.target, self.harness, device=self.cfg.device).text()

    def pending(self) -> list[PlannedOperator]:
        """The planned operators without a recorded result, in stream order."""
        done = self.store.done_positions(self.run_id)
        return [p for p in self.store.stream(self.run_id) if p.position not in done]

    def begin_operator(self, planned: PlannedOperator) -> OperatorSession:
        """Start (or restart from scratch) one operator: its steps, with the runner's hooks."""
        task = self.tasks[planned.operator]
        self.store.restart_operator(self.run_id, task.name)
        self.progress.operator_started(planned, task)
        return self.agent.session(task, _Hooks(self, planned, task))

    def process(self) -> None:
        self.progress.start(self.info, len(self.store.stream(self.run_id)), self.store.results(self.run_id))
        for planned in self.pending():
            session: OperatorSession | None = None
            try:
                session = self.begin_operator(planned)
                while not session.finished:
                    self.agent.round(session)
            except Exception as exc:  # one operator's failure is its result, not the run's end
                if stops_the_run(exc):
                    raise
                self.record_failure(planned, session, exc)

    def record_failure(self, planned: PlannedOperator, session: OperatorSession | None,
                       exc: Exception) -> None:
        """Record an operator whose processing failed as its result, with the reason; nothing of
        it is learned (its update, if it had begun, was rolled back). A resume skips it."""
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        if planned.position in self.store.done_positions(self.run_id):
            return  # it failed after its result and update were committed: nothing is lost
        reason = f"{type(exc).__name__}: {exc}"[:2000]
        if session is not None:
            result = replace(session.out.result(self.run_id, planned.position), error=reason)
        else:
            result = OperatorResult(run_id=self.run_id, position=planned.position, operator=planned.operator,
                                    level=planned.level, category=planned.category, compiled=False,
                                    correct=False, rounds_used=0, first_correct_round=None, t_first_ms=None,
                                    t_best_ms=None, t_ref_ms=None, error=reason)
        with db.transaction(self.conn):
            self.store.insert_result(result)
        self.progress.operator_done(result)


def _asker(model: Model, cfg: RunConfig) -> Callable[..., Reply]:
    """One model call with the run's settings (distillation and rule abstraction)."""
    def ask(messages: list[Message], grammar: str | None = None) -> Reply:
        return model.complete(messages, max_tokens=cfg.max_tokens_per_call, temperature=cfg.temperature,
                              grammar=grammar)

    return ask


def new_run_id(store: RunStore, method: str) -> str:
    base = f"{datetime.now().strftime('%Y%m%d_%H%M%S')}_{method}"
    run_id, n = base, 1
    while store.run(run_id) is not None:
        n += 1
        run_id = f"{base}_{n}"
    return run_id


def choose_run(store: RunStore, cfg: RunConfig) -> tuple[RunConfig, RunInfo | None]:
    """(the config to use, the run to resume or None for a new run)."""
    cfg, info = _chosen_run(store, cfg)
    if info is not None and info.status != "finished":
        _same_environment(cfg, info)
    return cfg, info


def _same_environment(cfg: RunConfig, info: RunInfo) -> None:
    """A run continues only under the result-changing environment it started with (runner/
    environment.py): under another, retrieval or task shapes would change within the run."""
    changed = cfg.environment_change()
    if changed:
        raise RunNotFound(f"run {info.run_id!r} started under another environment, and resuming it would "
                          "change its results midway: " + "; ".join(changed)
                          + ". Restore those variables to resume it, or start a new run (--new)")


def _chosen_run(store: RunStore, cfg: RunConfig) -> tuple[RunConfig, RunInfo | None]:
    if cfg.run_id:
        info = store.run(cfg.run_id)
        if info is None:
            if cfg.resume:
                raise RunNotFound(f"no run {cfg.run_id!r} in {cfg.workspace} to resume")
            return cfg, None
        stored = RunConfig.model_validate({**info.config["cfg"], "workspace": cfg.workspace,
                                           "memory": cfg.memory})
        _same_memory(info.config["cfg"], cfg)
        if cfg.resume:
            return stored.model_copy(update={"progress": cfg.progress}), info
        if stored.key() != cfg.key():
            _same_environment(stored, info)  # the likelier cause, named
            raise RunNotFound(f"run {cfg.run_id!r} exists with another configuration; resume it with "
                              f"`sage run --resume --run-id {cfg.run_id}` or pick a new --run-id")
        return cfg, info  # same identity: this command's settings (spend caps, model options) apply
    if cfg.resume:
        info = store.latest_unfinished()
        if info is None:
            raise RunNotFound(f"no unfinished run in {cfg.workspace} to resume; start one with `sage run`")
        _same_memory(info.config["cfg"], cfg)
        stored = RunConfig.model_validate({**info.config["cfg"], "workspace": cfg.workspace,
                                           "memory": cfg.memory})
        return stored.model_copy(update={"progress": cfg.progress}), info
    if cfg.new:
        return cfg, None
    unfinished = store.latest_unfinished(cfg.key())
    if unfinished is None:  # the same command again after its run finished: say so, learn nothing twice
        return cfg, next((i for i in store.runs() if i.config.get("key") == cfg.key()), None)
    _same_memory(unfinished.config["cfg"], cfg)
    return cfg, unfinished


def _same_memory(stored: Any, cfg: RunConfig) -> None:
    """A run resumes into the memory it learned into (the shared one is stored without password)."""
    from sagekernel.memory.backend import redact

    before = stored.get("memory") if isinstance(stored, dict) else None
    now = redact(cfg.memory) if cfg.memory else None
    if before != now:
        raise RunNotFound(f"this run learned into {before or 'its workspace memory'}; resume it with the "
                          f"same memory (--memory or SAGE_MEMORY_URL), not {now or 'the workspace memory'}")


def _memory_connection(cfg: RunConfig, conn: sqlite3.Connection, run_id: str) -> sqlite3.Connection:
    """The workspace itself, a shared PostgreSQL memory (--memory), or (--memory-from) a frozen
    snapshot copy of the donor's database."""
    if cfg.memory is not None:
        from sagekernel.memory.backend import connect_memory

        return connect_memory(cfg.memory)  # type: ignore[return-value]
    if cfg.memory_from is None:
        return conn
    snapshot = Path(cfg.workspace) / f"memory-from-{run_id}.db"
    if not snapshot.exists():  # copied once, so a resumed run sees the same memory
        source = db.connect(cfg.memory_from, create=False, readonly=True)
        tmp = snapshot.with_suffix(".tmp")
        target = sqlite3.connect(tmp)
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
        shutil.move(str(tmp), snapshot)
    return db.connect(snapshot)


@dataclass
class OpenedRun:
    """A run opened for processing (see `opened_run`): its runner, and how it ended."""

    runner: StreamRunner
    store: RunStore
    workspace: Path
    resumed: bool
    status: str = "failed"
    message: str = ""
    summary: RunSummary | None = None


@contextmanager
def opened_run(cfg: RunConfig, *, progress: Progress | None = None, model: Model | None = None,
               after_episode: Callable[[EpisodeTrace, bool], None] | None = None,
               finished: Callable[[StreamRunner], bool] | None = None,
              wrap_model: Callable[[Model], Model] | None = None) -> Iterator[OpenedRun | RunSummary]:
    """Open (create or resume) the run `cfg` describes, holding the workspace lock, and yield it
    with status "running"; on exit its status is set and its summary computed. Yields the run's
    summary instead when it had already finished (nothing is run or learned again).

    The caller drives `opened.runner` (`process()` for `sage run`, `begin_operator` for the MCP
    server). `finished(runner)` says whether a block that returned normally finished the run
    (default: it did); Ctrl-C/SIGTERM and a spent budget inside the block mark it interrupted.
    `wrap_model` wraps the run's model before its probe (`sage mcp`: a probe that reports instead of
    failing, mcp_server/server_model.py)."""
    from sagekernel.memory.io import load_seed
    from sagekernel.memory.policies import make_policy
    from sagekernel.memory.store import Store
    from sagekernel.models.config import Budget, model_config_from
    from sagekernel.models.registry import make_model, probe
    from sagekernel.targets import get_target
    from sagekernel.tasks.suites import load_suite

    workspace = db.require_directory(cfg.workspace)
    conn = db.connect(workspace)
    store = RunStore(conn)
    cfg, info = choose_run(store, cfg)
    resumed = info is not None
    if info is not None and info.status == "finished":
        yield summarize(store, info, workspace, resumed=True, message=(
            f"run {info.run_id} with this configuration already finished ({info.finished_at}); nothing "
            "was run or learned again. Pass --new to start another run"))
        return
    run_id = info.run_id if info is not None else (cfg.run_id or new_run_id(store, cfg.method))
    progress = progress or QuietProgress()
    with WorkspaceLock(workspace, run_id):
        target = get_target(cfg.target)
        check_device(target, cfg.device)  # everything that can fail without the model fails before it
        tasks = load_suite(cfg.suite, sandbox=cfg.harness_config().sandbox)  # task code: as candidates
        if info is None:
            planned = order(tasks, cfg.schedule)[: cfg.limit] if cfg.limit else order(tasks, cfg.schedule)
            # "not_started" until the model answers its probe: a bad spec or a dead endpoint must
            # not leave a run marked running
            info = RunInfo(run_id=run_id, status="not_started", method=cfg.method, model=cfg.model,
                           target=cfg.target, suite=cfg.suite, schedule=cfg.schedule, budget=cfg.budget,
                           frozen=cfg.frozen,
                           config={"key": cfg.key(), "cfg": cfg.stored()}, created_at=now_iso(),
                           finished_at=None)
            store.create_run(info, planned)
        by_name = {t.name: t for t in tasks}
        missing = [p.operator for p in store.stream(run_id) if p.operator not in by_name]
        if missing:
            raise RunNotFound(f"run {run_id!r} planned operators that the suite {cfg.suite!r} no longer "
                              f"has: {missing}")
        mem_conn = _memory_connection(cfg, conn, run_id) if cfg.memory else conn
        if cfg.memory_from is None and Store(mem_conn).is_empty():
            load_seed(mem_conn, target.seed_memory_path())  # the cold start of every new memory
        log = ExchangeLog(conn, run_id=run_id)
        budget = Budget(cfg.max_total_tokens, cfg.max_cost_usd) \
            if cfg.max_total_tokens or cfg.max_cost_usd else None
        if budget is not None:  # a resumed run has already spent part of its budget
            spent = run_spend(conn, run_id)
            budget.used_tokens, budget.used_cost_usd, budget.calls = spent.tokens, spent.cost_usd or 0.0, \
                spent.answered
        model = model or make_model(cfg.model, config=model_config_from(cfg.model_options), log=log,
                                    budget=budget)
        if wrap_model is not None:
            model = wrap_model(model)
        probe(model)
        if cfg.memory_from is not None:
            mem_conn = _memory_connection(cfg, conn, run_id)
        prompts = Prompts()

        policy = make_policy(cfg.method, mem_conn, run_id=run_id, frozen=cfg.frozen, seed=cfg.seed,
                             config=cfg.memory_config(),
                             **({"embedder": None} if cfg.embedder == "none" else {}),
                             abstract_rule=make_rule_abstractor(_asker(model, cfg), prompts, target.name),
                             provenance=_provenance(cfg, run_id, target), scope=_scope(cfg))
        runner = StreamRunner(cfg, conn, info, model, target, policy, by_name, progress, after_episode)
        opened = OpenedRun(runner, store, workspace, resumed)
        store.set_status(run_id, "running")
        unshield: Callable[[], None] = lambda: None  # noqa: E731
        try:
            with sigterm_as_interrupt():
                yield opened
            opened.status = "finished" if finished is None or finished(runner) else "interrupted"
        except KeyboardInterrupt:
            unshield = shield_cleanup()  # a second and third Ctrl-C must not cut the recording
            opened.status, opened.message = "interrupted", RunInterrupted().args[0]
        except BudgetExhausted as exc:
            opened.status, opened.message = "interrupted", str(exc)
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            store.set_status(run_id, opened.status)
            progress.close()
            if mem_conn is not conn:
                mem_conn.close()
            final = store.run(run_id)
            assert final is not None
            opened.summary = summarize(store, final, workspace, resumed=resumed, message=opened.message)
            unshield()


def run(cfg: RunConfig, *, progress: Progress | None = None, model: Model | None = None,
        after_episode: Callable[[EpisodeTrace, bool], None] | None = None) -> RunSummary:
    """Start or resume the run `cfg` describes; returns its summary. Raises RunInterrupted (after
    recording what finished) on Ctrl-C/SIGTERM, SageError subclasses for user-facing problems.

    `model` replaces the one built from `cfg.model` (tests pass a pre-built model to count calls);
    `after_episode(trace, last)` is called after each episode is handled: after the corr episode
    of an operator that goes on (nothing learned yet), and after its last episode once its result
    and updates are committed (tests use it to crash in either window)."""
    with opened_run(cfg, progress=progress, model=model, after_episode=after_episode) as opened:
        if isinstance(opened, RunSummary):
            return opened
        opened.runner.process()
    assert opened.summary is not None
    if opened.status == "interrupted" and opened.message == RunInterrupted().args[0]:
        interrupted = RunInterrupted(opened.message)
        interrupted.summary = opened.summary
        raise interrupted from None
    return opened.summary


def _provenance(cfg: RunConfig, run_id: str, target: Target) -> Any:
    """What this run stamps on every memory change it makes (memory/records.py Provenance)."""
    import hashlib
    import json
    import os

    from sagekernel.memory.records import Provenance

    settings = json.dumps(asdict(cfg.harness_config()), sort_keys=True, default=str)
    return Provenance(run_id=run_id, model=cfg.model, target=cfg.target,
                      device=check_device(target, cfg.device) or "",
                      protocol=hashlib.sha256(settings.encode()).hexdigest()[:12],
                      team=os.environ.get("SAGE_TEAM", ""))


def _scope(cfg: RunConfig) -> Any:
    from sagekernel.memory.records import RetrievalScope

    return RetrievalScope(tuple(sorted(cfg.retrieve_only.items())), tuple(cfg.exclude_runs))
