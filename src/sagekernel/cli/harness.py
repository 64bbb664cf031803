"""`sage` commands for this area (filled in by the area's owner)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the root app."""
