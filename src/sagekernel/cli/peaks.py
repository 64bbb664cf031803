"""`sage peaks`: the device peaks the roofline score divides by (harness/peaks.py, issue 31)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from sagekernel.terminal import Console

console = Console()


def register(app: typer.Typer) -> None:
    app.command("peaks")(peaks_command)


def peaks_command(
    reprobe: Annotated[bool, typer.Option("--reprobe", help="Measure again (else the cached figures).")] = (
        False),
    datasheet: Annotated[bool, typer.Option("--datasheet", help="Also list the accelerators' datasheet "
                                                                "peaks (harness/datasheets.py).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
) -> None:
    """This machine's CPU peaks as the roofline score uses them: one thread's STREAM triad bandwidth
    per working set and its FMA throughput, probed once and cached (`--reprobe` measures again)."""
    from sagekernel.harness.datasheets import DATASHEET
    from sagekernel.harness.peaks import ProbeError, cache_path, cpu_peaks

    try:
        peaks = cpu_peaks(reprobe=reprobe)
    except ProbeError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from None
    sheet = [{"name": r.name, "bandwidth_bytes_per_s": r.bandwidth_bytes_per_s, "flops_per_s": r.flops_per_s,
              "source": r.source} for r in DATASHEET]
    if as_json:
        out: dict[str, object] = {"cpu": peaks.to_dict(), "cache": str(cache_path())}
        if datasheet:
            out["datasheet"] = sheet
        typer.echo(json.dumps(out, indent=2))
        return
    table = Table(title=f"{peaks.device} (one thread; cached in {cache_path()})", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for size, rate in peaks.bandwidth_by_working_set:
        table.add_row(f"triad bandwidth, {size / 2**20:.3g} MiB working set", f"{rate / 1e9:.1f} GB/s")
    for dtype, rate in peaks.flops_per_s.items():
        table.add_row(f"FMA throughput ({dtype})", f"{rate / 1e9:.1f} GFLOP/s")
    table.add_row("measured at", str(peaks.detail.get("measured_at", "?")))
    table.add_row("compiler", str(peaks.detail.get("compiler", "?")))
    console.print(table)
    if datasheet:
        rows = Table(title="Datasheet peaks (accelerators)", title_justify="left")
        for name in ("device", "bandwidth", "compute", "source"):
            rows.add_column(name)
        for r in DATASHEET:
            compute = ", ".join(f"{t} {f / 1e12:g} TFLOP/s" for t, f in r.flops_per_s.items())
            rows.add_row(r.name, f"{r.bandwidth_bytes_per_s / 1e12:g} TB/s", compute, r.source)
        console.print(rows)
