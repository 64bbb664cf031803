"""The files of a reply (docs/target_seam.md): one fenced block per file, each headed by its path.

A multi-file target (Ascend C: kernel, host, tiling) lists its files with `Target.files(task)`;
the model writes each as a fenced block headed by its relative path, either on the line before
the fence (`FILE: op_kernel/add_custom.cpp`, `### op_kernel/add_custom.cpp`, `**add_custom.cpp**`),
in the fence's info string (```` ```cpp op_kernel/add_custom.cpp ````) or as a first-line comment
(`// FILE: op_kernel/add_custom.cpp`). A single-file target keeps the single block of
agent/protocol.py; its one path is `target.files(task)[0].path` (or `FALLBACK_PATHS` for a target
without `files`). `Candidate` is the record both produce.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sagekernel.candidate import Candidate

_FENCE_OPEN = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*?)\s*$")
_PATH_TOKEN = re.compile(r"[A-Za-z0-9_.\-/]+")
_FIRST_LINE_PATH = re.compile(r"^\s*(?://|#|/\*|--|;)\s*(?:file|path)\s*[:=]\s*(?P<path>\S+?)\s*(?:\*/)?\s*$",
                              re.IGNORECASE)
#: The single file of a target that does not list its files (before the target seam).
FALLBACK_PATHS = {"c": "kernel.c", "cuda": "kernel.cu", "python": "kernel.py", "ascendc": "kernel.cpp"}


@dataclass(frozen=True)
class FencedBlock:
    lang: str  # the first word of the info string, lower case ("" when unlabelled)
    info: str  # the whole info string
    body: str
    heading: str  # the nearest non-empty prose line before the fence ("" when none)


def fenced_blocks(text: str) -> tuple[list[FencedBlock], list[str]]:
    """(code blocks, prose lines outside any fence). An unclosed final fence runs to the end of the
    text (a reply cut off by max_tokens)."""
    blocks: list[FencedBlock] = []
    prose: list[str] = []
    heading = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opened = _FENCE_OPEN.match(lines[i])
        if not opened:
            prose.append(lines[i])
            if lines[i].strip():
                heading = lines[i].strip()
            i += 1
            continue
        fence, info = opened.group("fence"), opened.group("info")
        body: list[str] = []
        i += 1
        close = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        while i < len(lines) and not close.match(lines[i]):
            body.append(lines[i])
            i += 1
        i += 1  # skip the closing fence (or step past the end)
        lang = info.split()[0].lower() if info.split() else ""
        blocks.append(FencedBlock(lang, info, "\n".join(body), heading))
        heading = ""
    return blocks, prose


def file_paths(target: Any, task: Any) -> list[str]:
    """The relative paths the target asks for, in prompt order ([] for a target without `files`)."""
    files = getattr(target, "files", None)
    if files is None:
        return []
    return [spec.path for spec in files(task)]


def single_path(target: Any, task: Any) -> str:
    paths = file_paths(target, task)
    return paths[0] if paths else FALLBACK_PATHS.get(getattr(target, "language", ""), "kernel")


def _named(text: str, paths: Sequence[str]) -> str | None:
    """The one expected path `text` names (exactly, or by a unique file name), else None."""
    tokens = [(t[2:] if t.startswith("./") else t).rstrip(".:") for t in _PATH_TOKEN.findall(text)]
    for token in tokens:
        if token in paths:
            return token
    for token in tokens:
        by_name = [p for p in paths if p.rsplit("/", 1)[-1] == token.rsplit("/", 1)[-1]]
        if len(by_name) == 1 and "." in token:
            return by_name[0]
    return None


def pick_files(blocks: Sequence[FencedBlock], paths: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """(files by expected path, path-like names that no expected file matches).

    A block counts for a path when its fence info string, its first-line comment or the heading
    line just before it names that path; the last non-empty block for a path wins."""
    files: dict[str, str] = {}
    unknown: list[str] = []
    for block in blocks:
        body = block.body
        first = body.split("\n", 1)[0]
        comment = _FIRST_LINE_PATH.match(first)
        path = _named(" ".join(block.info.split()[1:]) or block.info, paths)
        if path is None and comment:
            path = _named(comment.group("path"), paths)
            if path is not None:
                body = body.split("\n", 1)[1] if "\n" in body else ""
        if path is None and block.heading:
            path = _named(re.sub(r"[*`]+|(?<!\w)_+|_+(?!\w)", " ", block.heading), paths)
        if path is None:
            label = re.match(r"^\W*(?:file|path)\s*:\s*(\S+)", block.heading, re.IGNORECASE)
            if label and label.group(1) not in unknown:
                unknown.append(label.group(1).strip("`*"))
            continue
        if body.strip():
            files[path] = body.strip("\n") + "\n"
    return files, unknown


def render_candidate(candidate: Candidate, languages: dict[str, str] | None = None) -> str:
    """The candidate as the reply protocol writes it (what traces store and prompts show again).
    A single-file candidate is its source text alone, as before the target seam."""
    if len(candidate.files) == 1:
        return candidate.main
    langs = languages or {}
    parts = [f"FILE: {path}\n```{langs.get(path, '')}\n{text.rstrip()}\n```"
             for path, text in candidate.files.items()]
    return "\n\n".join(parts) + "\n"


def read_candidate(text: str, paths: Sequence[str]) -> Candidate:
    """The inverse of `render_candidate` (for stored sources of multi-file targets)."""
    if len(paths) <= 1:
        return Candidate.single(paths[0] if paths else "kernel", text)
    files, _ = pick_files(fenced_blocks(text)[0], paths)
    return Candidate({p: files[p] for p in paths if p in files})
