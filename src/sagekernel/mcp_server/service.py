"""SAGE as tools for a coding agent: the operator session of a `sage run`, driven by tool calls.

`KernelService` is the whole of the server's logic, free of the MCP SDK: every tool is one
method that takes plain values and returns a JSON-able dict. It drives the same objects as
`sage run` (runner/run.py `opened_run`, `StreamRunner.begin_operator`, agent/session.py), so the
round trace, the result, distillation, ATU and UGC are those of a `sage run` of the same trace:
the coding agent only replaces the model that writes candidates and adoption decisions.

The trace-completeness hook (spec §2 step 3, §15): `evaluate` refuses -- naming the missing ids,
spending no round -- while any experience retrieved since the last evaluation lacks a valid
adoption record; each refusal counts as a re-ask of the round, as the gate's re-asks do. The
records are those of `sage run`: `{"id": "E12" | "R3", "decision": "ADOPTED" | "NOT ADOPTED",
"rationale": ...}`, validated by the same schema (agent/decisions.py); one that does not validate
decides nothing and is named in the refusal.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from sagekernel.agent.decisions import read_block
from sagekernel.agent.files import file_paths, single_path
from sagekernel.agent.knowledge import knowledge_for
from sagekernel.agent.session import OperatorSession, Submission
from sagekernel.candidate import Candidate
from sagekernel.errors import SageError
from sagekernel.mcp_server.diagnosis import diagnosis_result, diagnostics_offered
from sagekernel.models.exchange_log import mark_tool_call_undelivered, record_tool_call
from sagekernel.records import EpisodeKind, ResidentRule, RetrievedItem
from sagekernel.runner.config import evaluation_deadline_s
from sagekernel.runner.interrupts import EvaluationTimeout, deadline
from sagekernel.runner.run import OpenedRun
from sagekernel.runner.store import PlannedOperator


class ToolError(SageError):
    """A tool call that cannot be served (told to the agent as the tool's error)."""


def _item(i: RetrievedItem) -> dict[str, Any]:
    return {
        "id": f"E{i.item_id}",
        "title": i.title,
        "type": i.type,
        "category": i.category,
        "error_message": i.error_message,
        "wrong_code": i.wrong_code,
        "correct_code": i.correct_code,
        "relevance": round(i.relevance, 4),
        "utility": round(i.utility, 4),
    }


def _rule(r: ResidentRule) -> dict[str, Any]:
    return {"id": f"R{r.item_id}", "rule": r.rule_text}


class KernelService:
    """One opened run and the operator in progress; each public method is one tool."""

    def __init__(self, opened: OpenedRun, server_model: Any = None) -> None:
        self.opened = opened
        self.server_model = server_model  # PatientModel: its state is shown by `status`
        self.runner = opened.runner
        self.session: OperatorSession | None = None
        self.planned: PlannedOperator | None = None  # the open operator's place in the stream
        self.refusals = 0  # refused evaluations of the open round (its re-asks)
        self.log_client = "stdio"

    # ---- helpers ----------------------------------------------------------------------------------
    def _budget(self, s: OperatorSession) -> dict[str, Any]:
        return {
            "rounds_total": s.out.budget,
            "rounds_used": s.out.rounds_used,
            "rounds_left": s.out.rounds_left,
            "episode": s.kind.value,
            "correct_found": s.out.correct,
            "t_first_ms": s.out.t_first_ms,
            "t_best_ms": s.out.t_best_ms,
        }

    def _open(self) -> OperatorSession:
        if self.session is None or self.session.finished:
            raise ToolError("no operator is open: call open_operator first")
        return self.session

    def _candidate(self, s: OperatorSession, code: str | None, files: Mapping[str, str] | None) -> Candidate:
        paths = file_paths(s.target, s.task)
        if files:
            unknown = sorted(set(files) - set(paths))
            if unknown:
                raise ToolError(f"unknown file(s) {unknown}; this target's files are {paths}")
            missing = [p for p in paths if not files.get(p, "").strip()]
            if missing:
                raise ToolError(f"missing file(s) {missing}: give every file of the target")
            return Candidate({p: files[p] for p in paths})
        if code is None or not code.strip():
            raise ToolError(f"no source: pass `code` (the complete {paths[0]}) or `files`")
        if len(paths) > 1:
            raise ToolError(f"this target takes several files {paths}: pass them as `files`")
        return Candidate.single(single_path(s.target, s.task), code)

    def pending_operators(self) -> list[str]:
        return [p.operator for p in self.runner.pending()]

    # ---- tools ------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        r = self.runner
        out: dict[str, Any] = {
            "ready": True,
            "state": "open",
            "run_id": r.run_id,
            "workspace": str(self.opened.workspace),
            "method": r.cfg.method,
            "target": r.target.name,
            "suite": r.cfg.suite,
            "budget_per_operator": r.cfg.budget,
            "pending_operators": self.pending_operators(),
            "done_operators": len(r.store.results(r.run_id)),
        }
        if self.session is not None and not self.session.finished:
            out["open_operator"] = self.session.task.name
            out["budget"] = self._budget(self.session)
        report = getattr(self.server_model, "report", None)
        if report is not None:
            out["server_model"] = report()
        return out

    def open_operator(self, name: str | None = None) -> dict[str, Any]:
        pending = self.runner.pending()
        if self.session is not None and not self.session.finished:
            if name in (None, self.session.task.name):
                return self._describe(self.session)
            raise ToolError(f"operator {self.session.task.name} is open: finish_operator it first")
        if not pending:
            raise ToolError("every operator of this run has a result: the run is finished")
        planned = pending[0] if name is None else next((p for p in pending if p.operator == name), None)
        if planned is None:
            raise ToolError(
                f"{name!r} is not a pending operator of this run; pending: {[p.operator for p in pending]}"
            )
        self.session, self.refusals = self.runner.begin_operator(planned), 0
        self.planned = planned
        return self._describe(self.session)

    def _timed_out(self, s: OperatorSession, exc: EvaluationTimeout) -> ToolError:
        """An evaluation that outlived its deadline fails its operator, as in `sage run`: recorded
        with the reason, nothing of it learned; the agent goes on with the next operator."""
        assert self.planned is not None
        self.runner.record_failure(self.planned, s, exc)
        self.session = None
        return ToolError(f"{exc}; operator {s.task.name} is recorded as failed with this reason and is "
                         "closed (nothing of it is learned): open_operator for the next one")

    def _describe(self, s: OperatorSession) -> dict[str, Any]:
        task, target = s.task, s.target
        # the knowledge exactly as `sage run`'s prompt shows it: fence markers dropped, only the
        # passages for this operator's category kept (agent/knowledge.py)
        knowledge = knowledge_for(target.knowledge(), task.category)
        files = [
            {"path": f.path, "language": f.language, "role": f.role, "description": f.description}
            for f in getattr(target, "files", lambda _t: [])(task)
        ]
        return {
            "operator": task.name,
            "level": task.level,
            "category": task.category,
            "description": task.description,
            "reference": task.source,
            "contract": target.contract(task),
            "target": target.name,
            "language": target.language,
            "files": files,
            "knowledge": {
                "quick_reference": knowledge.quick_reference,
                "debugging_guide": knowledge.debugging_guide,
                "example": knowledge.example,
                "notes": list(knowledge.notes),
            },
            "diagnostics_available": diagnostics_offered(target),
            "resident_rules": [_rule(r) for r in s.memory.resident_rules()],
            "budget": self._budget(s),
            "pending_operators": self.pending_operators(),
        }

    def retrieve(self, query: str | None = None, k: int | None = None) -> dict[str, Any]:
        s = self._open()
        rnd = s.open_round()
        added: list[RetrievedItem] = []
        if query:  # an agent's own query: its items join the round and need decisions too
            extra = s.memory.retrieve(
                query,
                operator=s.task.name,
                category=s.task.category,
                episode=rnd.episode,
                k=k if k is not None else s.k,
            )
            added = s.add_items(extra)
        ctx = rnd.context
        return {
            "round": rnd.number,
            "episode": rnd.episode.value,
            "items": [_item(i) for i in rnd.items],
            "added_by_query": [f"E{i.item_id}" for i in added],
            "resident_rules": [_rule(r) for r in rnd.rules],
            "feedback": ctx.feedback,
            "current_code": ctx.current_code,
            "history": [asdict(h) for h in ctx.history],
            "best_ms": ctx.best_ms,
            "reference_ms": ctx.ref_ms,
            "budget": self._budget(s),
            "instruction": "give every item above (and each resident rule) an adoption record "
            "{id, decision: ADOPTED or NOT ADOPTED, rationale} in `evaluate`",
        }

    def evaluate(
        self,
        code: str | None = None,
        files: Mapping[str, str] | None = None,
        adoptions: Sequence[Mapping[str, Any]] = (),
        diagnosis: str = "",
    ) -> dict[str, Any]:
        s = self._open()
        rnd = s.open_round()
        candidate = self._candidate(s, code, files)
        decided = read_block({"decisions": [dict(a) for a in adoptions]}, shown_items=rnd.shown,
                             shown_rules=[r.item_id for r in rnd.rules])
        conflicts = {int(c[1:]) for c in decided.conflicts if c.startswith("E")}
        unknown = decided.unknown
        missing = s.unresolved(decided.items, conflicts)
        if missing:
            self.refusals += 1
            return {
                "status": "refused",
                "round_spent": False,
                "round": rnd.number,
                "missing": [f"E{i}" for i in missing],
                "conflicting": [f"E{i}" for i in sorted(conflicts)],
                "unknown": unknown,
                "invalid": decided.invalid,
                "message": (
                    "not evaluated: every experience retrieved since the last evaluation needs an "
                    'adoption record {"id", "decision": "ADOPTED" or "NOT ADOPTED", "rationale"}; '
                    "missing: " + ", ".join(f"E{i}" for i in missing)
                ),
                "budget": self._budget(s),
            }
        try:  # the runner bounds the evaluation (runner/run.py `_evaluate`: a watchdog in this thread)
            trace, verdict = s.submit(Submission(
                candidate,
                decided.items,
                conflicts,
                decided.rules_used(),
                self.refusals,
                (),
                "",
                {f.path: f.language for f in getattr(s.target, "files", lambda _t: [])(s.task)},
                decided.rules,
                "mcp",
                dict(decided.evidence),
            ))
        except EvaluationTimeout as exc:
            raise self._timed_out(s, exc) from None
        self.refusals = 0
        del diagnosis  # kept in the tool-call log with the arguments; the trace has no field for it
        out: dict[str, Any] = {
            "status": "evaluated",
            "round_spent": True,
            "round": trace.round,
            "episode": trace.episode.value,
            "verdict": {
                "stage": verdict.stage.value,
                "compiled": verdict.compiled,
                "correct": verdict.correct,
                "message": verdict.message,
                "candidate_ms": verdict.candidate_ms,
                "reference_ms": verdict.reference_ms,
                "speedup": verdict.speedup,
                "suspect": verdict.suspect,
            },
            "feedback": s.out.feedback(),
            "unknown": unknown,
            "budget": self._budget(s),
            "operator_finished": s.finished,
        }
        if not s.finished and s.kind is EpisodeKind.OPT and trace.episode is EpisodeKind.CORR:
            out["next"] = "correct: the optimisation episode starts from this kernel with the rounds left"
        if s.finished:
            out["result"] = self._result(s)
        return out

    def diagnose(self, code: str | None = None, files: Mapping[str, str] | None = None) -> dict[str, Any]:
        from sagekernel.harness.diagnose import diagnose

        s = self._open()
        r = self.runner
        candidate = self._candidate(s, code, files)
        try:
            with deadline(evaluation_deadline_s(r.harness), f"diagnosing a candidate for {s.task.name}"):
                report = diagnose(s.task, candidate, s.target, r.harness, device=r.cfg.device)
        except EvaluationTimeout as exc:
            raise self._timed_out(s, exc) from None
        return {"round_spent": False, **diagnosis_result(report)}

    def finish_operator(self) -> dict[str, Any]:
        s = self._open()
        s.finish()
        return {
            "status": "finished",
            "result": self._result(s),
            "pending_operators": self.pending_operators(),
        }

    def _result(self, s: OperatorSession) -> dict[str, Any]:
        results = {r.operator: r for r in self.runner.store.results(self.runner.run_id)}
        result = results.get(s.task.name)
        return asdict(result) if result is not None else {}

    # ---- the tool-call log ------------------------------------------------------------------------
    def log(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        result_text: str,
        status: str,
        started: float,
        round_: int | None = None,
    ) -> int | None:
        """Append one call; `result_text` is the JSON the client is sent (results.to_json_text)."""
        s = self.session
        return record_tool_call(self.runner.conn, run_id=self.runner.run_id, client=self.log_client,
                                tool=tool, operator=s.task.name if s else None, round_=round_, status=status,
                                arguments=arguments, result_json=result_text,
                                wall_s=round(time.perf_counter() - started, 4))

    def mark_undelivered(self, row: int) -> None:
        """The client gave up on this call before its result arrived (timeout, cancellation)."""
        mark_tool_call_undelivered(self.runner.conn, row)
