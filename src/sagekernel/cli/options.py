"""Validation of `sage` option values: every bad value is refused with one line naming the option.

Click checks types and the ranges declared on an option; what it cannot know (a value that must
name something, a file that must be UTF-8 text, a settings model's own rules) is checked here
before any work starts, and the message always begins with the option (or argument) it is about.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from sagekernel.errors import SageError
from sagekernel.limits import MAX_SOURCE_BYTES


class OptionError(SageError):
    """A command-line value that cannot be used; the message starts with the option's name."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"{option}: {problem}")
        self.option = option


def choice(value: str, choices: Collection[str], option: str) -> str:
    """`value` if it is one of `choices`, else an OptionError listing them."""
    if value not in choices:
        raise OptionError(option, f"unknown value {value!r}; choose one of {', '.join(choices)}")
    return value


def at_least(value: float, least: float, option: str) -> float:
    """`value` if it is a finite number ≥ `least` (NaN and infinities are refused too)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise OptionError(option, f"must be a finite number, got {value!r}")
    if value < least:
        raise OptionError(option, f"must be at least {least:g}, got {value!r}")
    return value


def read_text(path: Path, option: str) -> str:
    """The UTF-8 text of the file `path` names (a binary or non-UTF-8 file is refused, named)."""
    try:
        data = Path(path).read_bytes()
    except IsADirectoryError:
        raise OptionError(option, f"{path} is a directory, not a file") from None
    except OSError as exc:
        raise OptionError(option, f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_SOURCE_BYTES:
        raise OptionError(option, f"{path} is {len(data):,} bytes; at most {MAX_SOURCE_BYTES:,} are accepted "
                                  "(docs/limits.md)")
    if b"\0" in data:
        raise OptionError(option, f"{path} is a binary file, not source text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OptionError(option, f"{path} is not UTF-8 text (byte {exc.start}: "
                                  f"{data[exc.start:exc.start + 1]!r})") from None


def from_validation(exc: Any, options: Mapping[str, str] | None = None) -> OptionError:
    """A pydantic ValidationError of a settings model built from options, as one line naming the
    option of its first error (`options` maps a field to its option when the names differ)."""
    first = exc.errors()[0]
    field = str(first["loc"][0]) if first.get("loc") else ""
    option = (options or {}).get(field, "--" + field.replace("_", "-") if field else "option")
    message = str(first.get("msg", exc)).removeprefix("Value error, ")
    got = first.get("input")
    more = len(exc.errors()) - 1
    return OptionError(option, f"{message}" + (f", got {got!r}" if not isinstance(got, dict) else "")
                       + (f" (and {more} more)" if more > 0 else ""))


def output_file(path: Path | None, option: str) -> Path | None:
    """`path` if a file can be written there: not an existing directory (checked before any work,
    so a long report or replay is not computed only to fail at its end)."""
    if path is not None and Path(path).is_dir():
        raise OptionError(option, f"{path} is a directory; give a file path")
    return path


def pinned_device(device: str | None) -> str | None:
    """The target's device named by a --device value; `cuda:N` / `npu:N` also pin this process to
    card N before any device runtime starts (devices.py): it and every child it starts,
    sandboxed or not, then see that card only, as device 0."""
    from sagekernel.devices import DeviceError, pin_current_process, split_device

    try:
        name, slot = split_device(device)
    except DeviceError as exc:
        raise OptionError("--device", str(exc).removeprefix(f"--device {device!r}: ")) from None
    pin_current_process(slot)
    return name


#: `--memory` help (sage run, sage mcp, sage memory …).
MEMORY_HELP = ("A shared PostgreSQL memory, postgresql://user@host:port/db (docs/shared_memory.md); "
               "default: $SAGE_MEMORY_URL, else the workspace's own SQLite memory.")


def shared_memory(value: str | None) -> str | None:
    """The shared memory URL of `--memory` (or SAGE_MEMORY_URL), or None for the workspace's."""
    from sagekernel.memory.backend import MemoryBackendError, memory_url

    try:
        return memory_url(value)
    except MemoryBackendError as exc:
        raise OptionError("--memory", str(exc).split(": ", 1)[-1]) from None
