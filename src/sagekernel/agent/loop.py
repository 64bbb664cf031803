"""One operator's trajectory: a correctness episode, then an optimisation episode (spec §1, §2).

Both episodes share T rounds. A round is: retrieve (query = operator spec + latest feedback) ->
prompt from templates -> reply -> trace-completeness gate (re-asks, no evaluation) -> evaluate
-> record. The corr episode ends at the first correct kernel; the opt episode starts from the best
correct kernel and uses the rounds left. The agent never writes memory: after each episode it
hands the trace to `hooks.on_episode`; the runner learns from an operator's episodes only once
the operator has finished and its result is recorded (no operator is helped by its own
experience). A candidate is a `Candidate` (files by path): one file for single-file targets, one
per `Target.files(task)` entry for multi-file ones (agent/files.py).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sagekernel import defaults
from sagekernel.agent.files import file_paths, single_path
from sagekernel.agent.gate import IncompleteReply, channel_name, complete_reply
from sagekernel.agent.prompt import Prompts, shown_order
from sagekernel.agent.session import (
    Diagnose,
    Evaluate,
    OperatorSession,
    SessionHooks,
    Submission,
    candidate_hash,
)
from sagekernel.agent.state import OperatorOutcome
from sagekernel.models.base import Message, Model, OutputSchema, Reply, StructuredOutput
from sagekernel.models.exchange_log import exchange_context
from sagekernel.protocols import MemoryPolicy, Target
from sagekernel.tasks.task import Task

__all__ = ["Agent", "AgentConfig", "AgentHooks", "Evaluate", "candidate_hash"]


class AgentConfig(BaseModel):
    """Knobs of the agent loop (spec §14 where the spec has them)."""

    model_config = ConfigDict(extra="forbid")

    rounds: int = Field(default=defaults.ROUNDS, ge=1)
    """T: refinement rounds per operator, shared by the corr and opt episodes (spec §1, SOURCED)."""
    k: int = Field(default=defaults.K, ge=0)
    """Experiences retrieved per round (spec §3, DERIVED)."""
    max_reasks: int = Field(default=defaults.MAX_REASKS, ge=0)
    """Trace-completeness re-asks per round before unresolved items stay ⊥ / the round fails PARSE."""
    history: int = Field(default=defaults.HISTORY, ge=0)
    """How many earlier attempts the prompt summarises."""
    max_tokens: int = Field(default=defaults.MAX_TOKENS, ge=64)
    """Completion-token cap per model call."""
    temperature: float = Field(default=defaults.TEMPERATURE, ge=0)
    """Sampling temperature of every agent call."""


#: What the runner does as the trajectory unfolds (persisting, learning, progress).
AgentHooks = SessionHooks


class Agent:
    def __init__(self, model: Model, target: Target, memory: MemoryPolicy, evaluate: Evaluate,
                 config: AgentConfig | None = None, prompts: Prompts | None = None,
                 diagnose: Diagnose | None = None) -> None:
        self.model, self.target, self.memory, self.evaluate = model, target, memory, evaluate
        self.config = config or AgentConfig()
        self.prompts = prompts or Prompts()
        self.diagnose = diagnose

    def session(self, task: Task, hooks: AgentHooks) -> OperatorSession:
        """The operator's steps (agent/session.py), as this loop and the MCP server drive them."""
        return OperatorSession(task, self.target, self.memory, self.evaluate, hooks,
                               rounds=self.config.rounds, k=self.config.k, history=self.config.history,
                               diagnose=self.diagnose)

    def run_operator(self, task: Task, hooks: AgentHooks) -> OperatorOutcome:
        session = self.session(task, hooks)
        while not session.finished:
            self.round(session)
        return session.out

    def round(self, session: OperatorSession) -> None:
        """retrieve -> prompt -> reply -> trace-completeness gate (re-asks) -> evaluate -> record."""
        task, rnd = session.task, session.open_round()
        specs = list(getattr(self.target, "files", lambda _t: [])(task))
        paths = file_paths(self.target, task)
        structured = self.structured_output
        messages = self.prompts.round_messages(task, self.target, rnd.context, files=specs,
                                               channel=structured)
        try:
            with exchange_context(operator=task.name, round=rnd.number, episode=rnd.episode.value):
                gate = complete_reply(self._ask, messages, prompts=self.prompts,
                                      shown_items=[i.item_id for i in shown_order(rnd.items)],
                                      shown_rules=[r.item_id for r in rnd.rules],
                                      language=self.target.language, max_reasks=self.config.max_reasks,
                                      files=[(s.path, s.language) for s in specs] if len(specs) > 1 else [],
                                      structured=structured,
                                      channel=channel_name(structured,
                                                           bool(getattr(self.model, "decodes_under_grammar",
                                                                        False))))
            candidate = gate.parsed.candidate(paths, single_path(self.target, task))
            assert candidate is not None  # the gate raises IncompleteReply otherwise
            error = ""
        except IncompleteReply as exc:
            gate, candidate, error = exc.outcome, None, str(exc)
        decided = gate.parsed.decided
        session.submit(Submission(candidate, decided.items, set(gate.parsed.conflicts),
                                  decided.rules_used(), gate.reasks, gate.replies, error,
                                  {s.path: s.language for s in specs}, decided.rules, gate.channel,
                                  dict(decided.evidence)))

    @property
    def structured_output(self) -> StructuredOutput | None:
        """The model's structured-output mechanism for decisions (agent/gate.py), or None."""
        return getattr(self.model, "structured_output", None)

    def _ask(self, messages: list[Message], purpose: str = "round", grammar: str | None = None,
             output_schema: OutputSchema | None = None) -> Reply:
        with exchange_context(purpose=purpose):
            if output_schema is None:
                return self.model.complete(messages, max_tokens=self.config.max_tokens,
                                           temperature=self.config.temperature, grammar=grammar)
            return self.model.complete(messages, max_tokens=self.config.max_tokens,
                                       temperature=self.config.temperature, grammar=grammar,
                                       output_schema=output_schema)
