"""The memory methods and their variants (spec §9): names only, importable without the memory's
machinery (the CLI's option help and RunConfig's check read them at start-up)."""

from __future__ import annotations

from dataclasses import dataclass

METHODS = ("refinement", "static-rag", "value-memory", "sage", "sage-uniform-credit", "sage-no-ugc",
           "sage-random-ugc")


@dataclass(frozen=True)
class Variant:
    credit: str  # "atu" | "uniform" | "value" | "none"
    ugc: str  # "utility" | "random" | "none"
    rerank: bool  # utility reranking (γ) in retrieval


VARIANTS = {
    "static-rag": Variant("none", "none", False),
    "value-memory": Variant("value", "none", False),
    "sage": Variant("atu", "utility", True),
    "sage-uniform-credit": Variant("uniform", "utility", True),
    "sage-no-ugc": Variant("atu", "none", True),
    "sage-random-ugc": Variant("atu", "random", True),
}
#: Methods whose memory learns and takes new items (spec §5, §9: refinement and static RAG write nothing).
WRITING_METHODS = tuple(m for m, v in VARIANTS.items() if v.credit != "none")
