"""A deterministic model whose replies come from a script: for tests and offline demos.

Script file (JSON, YAML or JSON Lines; a top-level list is shorthand for `{"replies": [...]}`)::

    {"replies": [
        {"text": "first reply"},                              # sequential: used once, in order
        {"match": "(?i)softmax", "text": "…softmax kernel…"}, # regex on the last user message
        {"match": "ATU", "on": "prompt", "text": "…"},        # regex on the whole prompt
        {"turn": 5, "text": "…"},                             # exactly the 5th call (1-based)
        {"match": "overflow", "error": "context length"},     # raise ModelError instead
        "a bare string is a sequential reply"],
     "fallback": "used when nothing else applies"}

Each call picks, in order: the entry for this turn; the first entry whose regex matches (matching
entries are reusable unless `"once": true`); the next unused sequential entry; the fallback. With
none of these it raises `ModelError`. An entry may also set `finish_reason`, `prompt_tokens`,
`completion_tokens`. Token counts default to ≈chars/4. `prompts` records every prompt seen.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagekernel.errors import ModelError, SageError
from sagekernel.models.backend import BackendModel, Request, estimate_tokens
from sagekernel.models.base import Message, Reply
from sagekernel.models.config import Budget, ModelConfig
from sagekernel.models.exchange_log import ExchangeLog, flatten_messages


@dataclass
class _Entry:
    index: int
    text: str | None
    match: re.Pattern[str] | None
    on_prompt: bool
    turn: int | None
    once: bool
    error: str | None
    finish_reason: str
    prompt_tokens: int | None
    completion_tokens: int | None


class ScriptedModel(BackendModel):
    """Replies from a script (see module docstring); `prompts` holds every request's messages."""

    free = True

    def __init__(self, script: dict[str, Any] | list[Any], *, name: str = "scripted",
                 config: ModelConfig | None = None, log: ExchangeLog | None = None,
                 budget: Budget | None = None, **kwargs: Any) -> None:
        super().__init__(name, config=config, log=log, budget=budget, **kwargs)
        if isinstance(script, list):
            script = {"replies": script}
        if not isinstance(script, dict) or not isinstance(script.get("replies", []), list):
            raise SageError(f"{name}: a script is a list of replies or an object with a 'replies' list")
        self._entries = [_parse_entry(i, raw, name) for i, raw in enumerate(script.get("replies", []))]
        fallback = script.get("fallback")
        self._fallback = None if fallback is None else _parse_entry(-1, fallback, name)
        self._used: set[int] = set()
        self._lock = threading.Lock()
        self.turn = 0
        self.prompts: list[list[Message]] = []
        #: The grammar of each request (a script's replies are not constrained by it).
        self.grammars: list[str | None] = []

    @classmethod
    def from_file(cls, path: Path | str, **kwargs: Any) -> ScriptedModel:
        path = Path(path)
        kwargs.setdefault("name", f"scripted:{path}")
        return cls(load_script(path), **kwargs)

    def probe(self) -> None:
        """Always ready (the script was validated when loaded)."""

    def _complete_once(self, request: Request) -> Reply:
        with self._lock:
            self.turn += 1
            self.prompts.append(list(request.messages))
            self.grammars.append(request.grammar)
            entry = self._pick(request.messages)
        if entry is None:
            last = _last_user(request.messages)
            raise ModelError(f"{self.name}: no scripted reply for call {self.turn} "
                             f"(last user message starts {last[:80]!r}) and no fallback")
        if entry.error is not None:
            raise ModelError(f"{self.name}: scripted error: {entry.error}")
        text = entry.text or ""
        if request.stop:
            cut = [text.index(s) for s in request.stop if s in text]
            text = text[: min(cut)] if cut else text
        prompt_tokens = entry.prompt_tokens
        if prompt_tokens is None:
            prompt_tokens = sum(estimate_tokens(m.content) + 4 for m in request.messages)
        completion_tokens = entry.completion_tokens
        if completion_tokens is None:
            completion_tokens = estimate_tokens(text)
        finish = entry.finish_reason
        if completion_tokens > request.max_tokens:  # behave like a real model hitting max_tokens
            text, completion_tokens, finish = text[: request.max_tokens * 4], request.max_tokens, "length"
        return Reply(text=text, model=self.name, prompt_tokens=prompt_tokens,
                     completion_tokens=completion_tokens, finish_reason=finish,
                     extra={"script_entry": entry.index, "turn": self.turn})

    def _pick(self, messages: tuple[Message, ...]) -> _Entry | None:
        last_user = _last_user(messages)
        whole = flatten_messages(messages)
        for entry in self._entries:
            if entry.turn == self.turn and not (entry.once and entry.index in self._used):
                return self._use(entry)
        for entry in self._entries:
            if entry.match is None or entry.turn is not None or (entry.once and entry.index in self._used):
                continue
            if entry.match.search(whole if entry.on_prompt else last_user):
                return self._use(entry)
        for entry in self._entries:
            if entry.match is None and entry.turn is None and entry.index not in self._used:
                return self._use(entry)
        return self._fallback

    def _use(self, entry: _Entry) -> _Entry:
        self._used.add(entry.index)
        return entry


def load_script(path: Path) -> dict[str, Any] | list[Any]:
    """Read a script file: .json, .jsonl (one entry per line) or .yaml/.yml."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SageError(f"cannot read the scripted-model file {path}: {exc.strerror or exc}") from exc
    try:
        if path.suffix in (".yaml", ".yml"):
            data = _load_yaml(text, path)
        elif path.suffix == ".jsonl":
            data = {"replies": [json.loads(line) for line in text.splitlines() if line.strip()]}
        else:
            data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SageError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, (dict, list)):
        raise SageError(f"{path}: a script is a list of replies or an object with a 'replies' list")
    return data


def _load_yaml(text: str, path: Path) -> Any:
    try:
        import yaml
    except ImportError as exc:
        raise SageError(f"{path}: reading YAML scripts needs PyYAML (pip install pyyaml)") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SageError(f"{path} is not valid YAML: {exc}") from exc


def _parse_entry(index: int, raw: Any, name: str) -> _Entry:
    if isinstance(raw, str):
        raw = {"text": raw}
    if not isinstance(raw, dict):
        raise SageError(f"{name}: reply #{index} must be a string or an object, got {type(raw).__name__}")
    unknown = set(raw) - {"text", "match", "on", "turn", "once", "error", "finish_reason",
                          "prompt_tokens", "completion_tokens"}
    if unknown:
        raise SageError(f"{name}: reply #{index} has unknown keys {sorted(unknown)}")
    if raw.get("text") is None and raw.get("error") is None:
        raise SageError(f"{name}: reply #{index} needs 'text' or 'error'")
    if raw.get("on", "last_user") not in ("last_user", "prompt"):
        raise SageError(f"{name}: reply #{index}: 'on' is 'last_user' or 'prompt'")
    try:
        pattern = re.compile(raw["match"]) if raw.get("match") is not None else None
    except re.error as exc:
        raise SageError(f"{name}: reply #{index} has a bad regex {raw['match']!r}: {exc}") from exc
    return _Entry(index=index, text=None if raw.get("text") is None else str(raw["text"]), match=pattern,
                  on_prompt=raw.get("on") == "prompt", turn=raw.get("turn"),
                  once=bool(raw.get("once", False)),
                  error=raw.get("error"), finish_reason=str(raw.get("finish_reason", "stop")),
                  prompt_tokens=raw.get("prompt_tokens"), completion_tokens=raw.get("completion_tokens"))


def _last_user(messages: tuple[Message, ...] | list[Message]) -> str:
    return next((m.content for m in reversed(messages) if m.role == "user"), "")
