"""The type check, run so that its verdict cannot depend on which optional extras are installed.

mypy runs twice over `src/sagekernel`:
  1. as this environment is (whatever extras happen to be installed: the `ci`/`dev` set, or all of
     them after the full setup with the embedded model);
  2. with every optional runtime that pyproject's opaque list names (llama_cpp, triton, ray, ...)
     hidden, as on a machine where only the core dependencies and the `dev` extra are installed.
Both must pass with the same report. The opaque list (`[[tool.mypy.overrides]]` with
`follow_imports = "skip"`) is what makes them agree by construction; this script is the proof, and
tests/test_typecheck_env.py keeps the list complete.

Hiding works without uninstalling anything: a bare virtual environment whose only site entries are
shadow folders of this interpreter's import path, holding links to everything except the hidden
packages; mypy is pointed at it with --python-executable.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def opaque_modules() -> set[str]:
    """Top-level names of the optional runtimes mypy treats as opaque (pyproject is their one home)."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    names: set[str] = set()
    for override in cfg["tool"]["mypy"].get("overrides", []):
        if override.get("follow_imports") == "skip":
            names.update(m.split(".")[0] for m in override["module"])
    return names


def _import_name(entry: str) -> str:
    """The module an entry of a site folder provides: `seccomp.cpython-311-x86_64-linux-gnu.so` -> seccomp."""
    name = entry.split(".")[0]
    return name.split("-")[0] if entry.endswith((".dist-info", ".egg-info")) else name


def hidden_python(work: Path, hide: set[str]) -> Path:
    """A python executable whose import path is this one's minus the `hide` packages."""
    stdlib = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")}
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(subprocess.check_output(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        text=True).strip())
    shadows: list[str] = []
    here = os.path.dirname(os.path.abspath(__file__))
    for i, entry in enumerate(p for p in sys.path if p and os.path.isdir(p) and p != here):
        real = os.path.realpath(entry)
        in_stdlib = any(real == s or real.startswith(s + os.sep) for s in stdlib)
        if in_stdlib and "-packages" not in real:  # the venv has the standard library already
            continue
        shadow = work / f"shadow{i}"
        shadow.mkdir()
        for child in os.listdir(entry):
            if _import_name(child) not in hide:
                (shadow / child).symlink_to(os.path.join(entry, child))
        shadows.append(str(shadow))
    (site / "00-shadow.pth").write_text("\n".join(shadows) + "\n")
    return venv / "bin" / "python"


def run_mypy(label: str, extra: list[str]) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "mypy", "--no-error-summary", *extra]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    out = (proc.stdout + proc.stderr).strip()
    print(f"[typecheck] {label}: {'ok' if proc.returncode == 0 else 'FAILED'}", flush=True)
    if out:
        print(out)
    return proc.returncode, out


def main() -> int:
    hide = opaque_modules()
    installed = sorted(m for m in hide if _findable(m))
    print(f"[typecheck] optional runtimes installed here: {', '.join(installed) or 'none'}")
    rc_installed, out_installed = run_mypy("with this environment's extras", [])
    with tempfile.TemporaryDirectory(prefix="sage-typecheck-") as tmp:
        python = hidden_python(Path(tmp), hide)
        rc_hidden, out_hidden = run_mypy(
            f"with {', '.join(sorted(hide))} hidden",
            ["--python-executable", str(python), "--cache-dir", str(Path(tmp) / "cache")])
    if out_installed != out_hidden:
        print("[typecheck] FAILED: the verdict depends on which optional extras are installed")
        return 1
    return rc_installed or rc_hidden


def _findable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


if __name__ == "__main__":
    sys.exit(main())
