"""A candidate: the files the model wrote for one round, by relative path (docs/target_seam.md).

Single-file targets (CPU C, Triton, CUDA) hold one entry; Ascend C holds several. The digest names
a candidate's build directories; traces record `agent/session.candidate_hash` of the rendered
source instead (the text stored in `candidates`), which is what a trace's hash looks up.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Candidate:
    files: dict[str, str] = field(default_factory=dict)

    @classmethod
    def single(cls, path: str, text: str) -> Candidate:
        return cls({path: text})

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for path in sorted(self.files):
            h.update(path.encode() + b"\0" + self.files[path].encode() + b"\0")
        return h.hexdigest()[:16]

    @property
    def main(self) -> str:
        """The first file's text (the only one for single-file targets)."""
        return next(iter(self.files.values()), "")

    def is_empty(self) -> bool:
        return not any(text.strip() for text in self.files.values())


def folder_files(directory: Path, paths: list[str]) -> tuple[dict[str, Path], list[str]]:
    """A candidate kept as a folder (`sage eval TASK DIR`; NPUKernelBench's ``op_host/``,
    ``op_kernel/`` layout): ({relative path: file} for each of `paths` under `directory`, the
    paths it lacks). Nothing else in the folder is read, and no path leaves it."""
    root = Path(directory).resolve()
    found, missing = {}, []
    for rel in paths:
        where = (root / rel).resolve()
        if root in where.parents and where.is_file():
            found[rel] = where
        else:
            missing.append(rel)
    return found, missing


__all__ = ["Candidate", "folder_files"]
