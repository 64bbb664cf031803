"""`sage doctor`: what this machine has for each target and device, and what is missing."""

from __future__ import annotations

import json
import shutil
import sys
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from sagekernel.terminal import Console

console = Console()


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_command)


def facts() -> dict[str, Any]:
    """Targets with their devices (available or not, and why), the sandbox, the Python environment."""
    from sagekernel import sandbox
    from sagekernel.targets import get_target, target_names

    targets: list[dict[str, Any]] = []
    for name in target_names():
        try:
            target = get_target(name)
            devices = target.devices()
        except Exception as exc:  # a plug-in that fails to import is reported, not fatal
            targets.append({"target": name, "devices": [], "error": f"{type(exc).__name__}: {exc}"})
            continue
        rows = []
        for device in devices:
            try:
                ok, why = target.available(device.name)
            except Exception as exc:  # available() must not raise; say so if it does
                ok, why = False, f"available() raised {type(exc).__name__}: {exc}"
            rows.append(
                {
                    "device": device.name,
                    "available": ok,
                    "reason": why,
                    "evidence": device.evidence.value,
                    "timed": device.timed,
                }
            )
        targets.append({"target": name, "devices": rows})
    seccomp = "missing"
    try:
        import pyseccomp  # noqa: F401

        seccomp = "pyseccomp"
    except ImportError:
        try:
            import seccomp as _sc  # noqa: F401

            seccomp = "python3-seccomp"
        except ImportError:
            pass
    box = {
        "best": sandbox.best_kind("auto"),
        "bwrap": shutil.which("bwrap") is not None and sandbox.bwrap_works(),
        "prlimit": shutil.which("prlimit") is not None,
        "python_seccomp_bindings": seccomp,
        "note": "the CPU driver installs its own seccomp allow-list; the bindings serve Python runtimes",
    }
    env = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": sys.base_prefix,
        "virtual_env": sys.prefix != sys.base_prefix,
        "bound_into_sandbox": sandbox.python_roots(),
    }
    try:
        import torch

        env["torch"] = torch.__version__
    except ImportError:
        env["torch"] = None
    return {"targets": targets, "sandbox": box, "python": env}


def doctor_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the facts as JSON.")] = False,
) -> None:
    """Show which targets and devices can run here, why the others cannot, and the sandbox in use."""
    data = facts()
    if as_json:
        print(json.dumps(data, indent=2))
        return
    table = Table(title="targets and devices")
    for col in ("target", "device", "available", "evidence", "timed", "reason"):
        table.add_column(col)
    for t in data["targets"]:
        if "error" in t:
            table.add_row(t["target"], "-", "no", "-", "-", escape(t["error"]))
        for d in t["devices"]:
            table.add_row(
                t["target"],
                d["device"],
                "yes" if d["available"] else "no",
                d["evidence"],
                "yes" if d["timed"] else "no",
                escape(d["reason"]),
            )
    console.print(table)
    box = data["sandbox"]
    console.print(
        f"sandbox: {box['best']} (bubblewrap {'works' if box['bwrap'] else 'unavailable'}, "
        f"prlimit {'found' if box['prlimit'] else 'missing'}, Python seccomp bindings: "
        f"{box['python_seccomp_bindings']})"
    )
    env = data["python"]
    console.print(
        escape(
            f"python {env['python']} at {env['executable']}"
            f"{' (virtual environment)' if env['virtual_env'] else ''}; torch {env['torch']}; "
            f"bound into the sandbox: {', '.join(env['bound_into_sandbox'])}"
        )
    )
