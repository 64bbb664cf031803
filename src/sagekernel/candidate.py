"""A candidate: the files the model wrote for one round, by relative path (docs/target_seam.md).

Single-file targets (CPU C, Triton, CUDA) hold one entry; Ascend C holds several. The digest names
a candidate's build directories; traces record `agent/session.candidate_hash` of the rendered
source instead (the text stored in `candidates`), which is what a trace's hash looks up.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


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


__all__ = ["Candidate"]
