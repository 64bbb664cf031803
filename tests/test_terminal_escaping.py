"""Untrusted text reaches the terminal inert: the escape sequences in a task description, a compiler
message, a model reply or a memory item are shown as visible escapes by every command that prints
them (one function, sagekernel.terminal.printable, applied by the Console every command uses)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagekernel import db
from sagekernel.memory.io import load_seed
from sagekernel.models.base import Message, Reply
from sagekernel.models.exchange_log import ExchangeLog
from sagekernel.terminal import printable
from test_cli_values import invoke

#: A window-title OSC, a clear-screen CSI, a C1 CSI, a bidi override and a bell.
HOSTILE = "pwn\x1b]0;owned\x07\x1b[2J\x9b31m\u202eevil"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def test_printable_makes_every_control_visible_and_keeps_text() -> None:
    assert printable("a\tb\nc") == "a\tb\nc"
    assert printable(HOSTILE) == "pwn\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\u202eevil"
    assert all(
        chr(c) not in printable("".join(map(chr, range(0x20)))) for c in range(0x20) if chr(c) not in "\t\n"
    )


TASK = f'''"""Doubles x. {HOSTILE}"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(64)]


def get_init_inputs():
    return []
'''


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hostile")
    tasks = root / "tasks"
    tasks.mkdir()
    (tasks / "evil_double.py").write_text(TASK)
    (tasks / "evil_error.py").write_text(f"raise RuntimeError({HOSTILE!r})\n")
    (root / "kernel.c").write_text(
        "#include <stdint.h>\n"
        "void sage_kernel(const float* restrict in0, float* restrict out0, int64_t C64) {\n"
        f'  for (int64_t i = 0; i < C64; ++i) out0[i] = 2.0f * in0[i];\n}}\n#error "{HOSTILE}"\n'
    )
    ws = root / "ws"
    conn = db.connect(ws)
    log = ExchangeLog(conn, run_id="r1")
    log.record(
        call_id="c1",
        attempt=1,
        status="ok",
        model_spec="scripted:x",
        messages=[Message("user", f"prompt {HOSTILE}")],
        params={},
        reply=Reply(text=f"reply {HOSTILE}", model="x", prompt_tokens=1, completion_tokens=1),
    )
    conn.close()
    export = root / "items.jsonl"  # a seed file (load_seed's format)
    export.write_text(
        json.dumps(
            {
                "title": f"title {HOSTILE}",
                "type": "correctness",
                "category": "elementwise",
                "error_message": HOSTILE,
                "wrong_code": HOSTILE,
                "correct_code": HOSTILE,
            }
        )
        + "\n"
    )
    return {
        "tasks": str(tasks),
        "kernel": str(root / "kernel.c"),
        "ws": str(ws),
        "export": str(export),
        "task": str(tasks / "evil_double.py"),
    }


COMMANDS = {
    "tasks show": ["tasks", "show", "evil_double", "--suite", "{tasks}"],
    "tasks check": ["tasks", "check", "{tasks}"],
    "eval": ["eval", "{task}", "{kernel}", "--skip-timing"],
    "log show": ["log", "show", "1", "--workspace", "{ws}"],
    "log list": ["log", "list", "--workspace", "{ws}"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_untrusted_text_is_printed_inert(hostile: dict[str, str], command: str) -> None:
    code, out, err = invoke([a.format(**hostile) for a in COMMANDS[command]])
    shown = out + err
    assert "pwn" in shown, (code, shown)  # the hostile text was printed ...
    assert not [c for c in RAW if c in shown], shown  # ... with nothing a terminal would act on
    if command == "tasks show":  # the class has no docstring: the file's is the description, not nn.Module's
        assert "Doubles x." in shown and "Base class for all neural network modules" not in shown


def test_memory_items_are_printed_inert(hostile: dict[str, str], tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    conn = db.connect(ws)
    load_seed(conn, Path(hostile["export"]))
    conn.close()
    for argv in (["memory", "list", "--workspace", ws], ["memory", "show", "1", "--workspace", ws]):
        code, out, err = invoke(argv)
        assert code == 0 and "pwn" in out and not [c for c in RAW if c in out + err], out + err
