"""The three protocols that are the whole architecture: Model, Target, MemoryPolicy.

Each has a real implementation that runs on a CPU-only machine (models: scripted/local,
targets: cpu, memory: the SQLite-backed policies), so every path runs in CI.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from sagekernel import defaults
from sagekernel.candidate import Candidate
from sagekernel.models.base import Message, Model, Reply
from sagekernel.records import EpisodeKind, EpisodeTrace, ItemDraft, ResidentRule, RetrievedItem
from sagekernel.seam import BuildResult, DeviceInfo, FileSpec, LintFinding, RuntimeSpec
from sagekernel.tasks.task import Task

__all__ = ["MemoryPolicy", "Message", "Model", "Reply", "Target", "TargetKnowledge"]


class TargetKnowledge(Protocol):
    """What the model is told about a backend (files under targets/<name>/)."""

    quick_reference: str
    debugging_guide: str
    example: str


@runtime_checkable
class Target(Protocol):
    """One backend (cpu | triton | cuda | ascendc | a plug-in found through the entry-point group
    `sagekernel.targets`): what the model sees, the static rules, building, and the runtime that
    runs in the sandboxed child. Judging correctness and timing belongs to the harness.
    docs/target_seam.md is the contract in prose."""

    name: str
    language: str  # fenced-code language of the main file, e.g. "c"

    def devices(self) -> list[DeviceInfo]: ...

    def available(self, device: str) -> tuple[bool, str]:
        """(usable here, why or why not). Never raises."""
        ...

    def files(self, task: Task) -> list[FileSpec]:
        """The files the model writes, in prompt order (one for single-file targets)."""
        ...

    def contract(self, task: Task) -> str:
        """The kernel contract text for this task (the signature the model must implement)."""
        ...

    def knowledge(self) -> TargetKnowledge: ...

    def lint(self, candidate: Candidate, task: Task) -> list[LintFinding]: ...

    def seed_memory_path(self) -> Path:
        """JSON Lines file of cold-start experience items for this target."""
        ...

    def build(
        self, candidate: Candidate, task: Task, workdir: Path, *, device: str, sandbox_kind: str,
        timeout_s: float,
    ) -> BuildResult: ...

    def runtime(self, built: BuildResult, task: Task, device: str) -> RuntimeSpec: ...


@runtime_checkable
class MemoryPolicy(Protocol):
    """One memory mechanism (none / static RAG / value memory / SAGE and its ablations).

    `retrieve` and `resident_rules` only read. `learn` is called by the runner alone, once per
    episode, after the operator's result has been recorded (single writer).
    """

    name: str

    def retrieve(self, query: str, *, operator: str, category: str, episode: EpisodeKind,
                 k: int = defaults.K) -> list[RetrievedItem]: ...

    def resident_rules(self) -> list[ResidentRule]: ...

    def learn(self, trace: EpisodeTrace, new_items: Sequence[ItemDraft] = (), *,
              rules: Mapping[int, str] | None = None) -> None:
        """In one transaction: ATU (or the method's credit rule), then writes of the distilled
        items (deduplicated, spec §5), then UGC (spec §6). `rules`: abstracted rule texts of the
        items the update validates, asked before the transaction (see `rule_requests`)."""
        ...

    def rule_requests(self, episodes: Sequence[tuple[EpisodeTrace, Sequence[ItemDraft]]]) -> list[Any]:
        """What learning `episodes` would ask the rule-abstraction model (a rolled-back dry run)."""
        ...

    def abstract_rules(self, requests: Sequence[Any]) -> dict[int, str]:
        """The model's rule text per requested item id (called outside any transaction)."""
        ...
