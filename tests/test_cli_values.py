"""Every option and argument of every `sage` command, fed a bad value, is refused with one line that
names the option (or the value), exit status 2, and never a traceback.

The table below holds bad values per (command, option); the first test checks that it covers every
option of every command (a new option without an entry fails), so no command escapes the check.
Each case runs `sage` in-process (as the console script does: `sagekernel.cli.main`), against a
fresh workspace, with a model spec that cannot be built: a value the command failed to validate
runs into that instead and the test names it.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from sagekernel import db
from sagekernel.cli import app, main

BAD_MODEL = "scripted:/nonexistent/replies.jsonl"
#: A shared memory whose server cannot be reached (no such socket directory).
BAD_PG = "postgresql://sage@/sage?host=/nonexistent-sage-socket"

#: What each command is run with besides the value under test ({ws}, {file}... are filled in).
BASE: dict[str, list[str]] = {
    "simulate": ["--items", "20", "--operators", "2", "--seeds", "1"],
    "eval": ["softmax", "{kernel}", "--skip-timing"],
    "lint": ["softmax", "{kernel}"],
    "selfcheck": ["--suite", "{empty}", "--skip-timing"],
    "run": ["--workspace", "{ws}", "--model", BAD_MODEL, "--suite", "demo", "--limit", "1", "--no-progress"],
    "mcp": ["--workspace", "{ws}", "--model", BAD_MODEL, "--suite", "demo", "--limit", "1"],
    "report": ["{ws}"],
    "doctor": [],
    "peaks": [],
    "memory list": ["--workspace", "{ws}"],
    "memory show": ["1", "--workspace", "{ws}"],
    "memory stats": ["--workspace", "{ws}"],
    "memory export": ["{out}", "--workspace", "{ws}"],
    "memory import": ["{seed}", "--workspace", "{ws}"],
    "memory replay": ["--workspace", "{ws}"],
    "tasks list": [],
    "tasks show": ["softmax"],
    "tasks check": ["{empty}"],
    "tasks suites": [],
    "log list": ["--workspace", "{ws}"],
    "log show": ["1", "--workspace", "{ws}"],
    "log search": ["softmax", "--workspace", "{ws}"],
    "log tools": ["--workspace", "{ws}"],
    "audit adoptions": ["nonexistent-run", "--workspace", "{ws}"],
    "experiment run": ["{experiment}", "--dir", "{fresh}"],
    "experiment status": ["{expdir}"],
    "experiment report": ["{expdir}"],
    "experiment presets": [],
    "experiment show": ["smoke"],
}

#: A valid experiment whose only stream fails at once (its model cannot be built).
EXPERIMENT = f"""name = "x"
[models]
m = "{BAD_MODEL}"
[defaults]
suite = "demo"
target = "cpu"
budget = 1
schedules = ["given"]
methods = ["refinement"]
models = ["m"]
[[streams]]
name = "{{method}}-{{model}}"
"""
PATHS = ["{binary}", "{latin1}", "{missing}"]
HOSTILE = "\x1b]0;title\x07' OR 1=1 --"
#: Bad values per command and option (an argument is named by its parameter name).
BAD: dict[str, dict[str, list[str]]] = {
    "simulate": {"--items": ["-5", "0", "abc"], "--operators": ["0", "-1"], "--seeds": ["0", "-1"]},
    "eval": {
        "task": ["{binary_py}", "nonexistent_task"],
        "kernel_file": [*PATHS, "{empty}"],
        "--target": ["nonsense"],
        "--device": ["nonsense", "cuda:x", "cpu:0"],
        "--threads": ["-3", "0", "abc"],
        "--sandbox": ["nonsense"],
        "--baseline": ["nonsense", ""],
        "more_files": ["{binary}"],
    },
    "lint": {
        "task": ["{binary_py}", "nonexistent_task"],
        "candidate": [*PATHS],
        "--target": ["nonsense"],
    },
    "selfcheck": {"--suite": ["nonsense"], "--target": ["nonsense"], "--device": ["nonsense"],
                  "--baseline": ["nonsense"]},
    "run": {
        "--suite": ["nonsense"],
        "--target": ["nonsense"],
        "--device": ["nonsense", "cuda:x", "cpu:0"],
        "--model": ["nonsense", "oracle:nope=1", "oracle:base=2", "oracle:seed=x"],
        "--method": ["nonsense"],
        "--workspace": ["{binary}"],
        "--schedule": ["nonsense"],
        "--limit": ["0"],
        "--budget": ["0"],
        "--run-id": ["a/../../b", ""],
        "--memory-from": ["{missing}"],
        "--memory": ["nonsense", BAD_PG],
        "--retrieve-only": ["colour=red", "nonsense"],
        "--exclude-run": [HOSTILE],
        "--seed": ["-1", "abc"],
        "--embedder": ["nonsense"],
        "--gamma": ["-1", "nan", "inf"],
        "--hot-budget": ["-1"],
        "-k": ["-5", "abc"],
        "--max-reasks": ["-1"],
        "--history": ["-1", "abc"],
        "--max-new-items": ["-1"],
        "--max-tokens": ["5"],
        "--temperature": ["-1", "nan"],
        "--max-total-tokens": ["0"],
        "--max-cost": ["-1", "nan"],
        "--harness": ["iters=-3", "nonsense", "nope=1", "sandbox=nonsense"],
        "--model-config": ["{binary}", "{latin1}", "{missing}"],
        "--model-opt": ["nonsense", "nope=1"],
        "--baseline": ["nonsense", "EAGER"],
    },
    "mcp": {
        "--workspace": ["{binary}"],
        "--target": ["nonsense"],
        "--method": ["nonsense"],
        "--suite": ["nonsense"],
        "--device": ["nonsense"],
        "--model": ["nonsense"],
        "--schedule": ["nonsense"],
        "--limit": ["0"],
        "--budget": ["0"],
        "-k": ["-5"],
        "--run-id": ["a/../../b"],
        "--embedder": ["nonsense"],
        "--memory-from": ["{missing}"],
        "--seed": ["-1"],
        "--gamma": ["-1", "nan"],
        "--hot-budget": ["-1"],
        "--max-tokens": ["5"],
        "--temperature": ["-1"],
        "--max-new-items": ["-1"],
        "--max-total-tokens": ["0"],
        "--max-cost": ["-1"],
        "--harness": ["iters=-3"],
        "--model-config": ["{binary}"],
        "--model-opt": ["nonsense"],
        "--port": ["-1", "70000", "abc"],
        "--token-env": ["", "A=B"],
        "--memory": ["mysql://x"],
        "--baseline": ["nonsense"],
        "--retrieve-only": ["colour=red", "nonsense"],
        "--exclude-run": [HOSTILE],
    },
    "report": {
        "runs": ["{missing}", "{binary}"],
        "--html": ["{empty}"],
        "--csv": ["{empty}"],
        "--fast-p": ["-1", "nan"],
        "--memory": ["mysql://x", "{missing}", ""],
    },
    "memory list": {
        "--workspace": ["{missing}"],
        "--state": ["nonsense"],
        "--order": ["nonsense"],
        "--limit": ["-1"],
        "--memory": ["nonsense", BAD_PG],
        "--run": [HOSTILE],
        "--model": [HOSTILE],
        "--target": [HOSTILE],
        "--device": [HOSTILE],
        "--operator": [HOSTILE],
        "--team": [HOSTILE],
    },
    "memory show": {"item_id": ["abc", "-1", "999999"], "--workspace": ["{missing}"],
                    "--memory": ["nonsense"]},
    "memory stats": {"--workspace": ["{missing}"], "--memory": [BAD_PG]},
    "memory export": {"file": ["{empty}"], "--workspace": ["{missing}"], "--memory": ["nonsense"]},
    "memory import": {"file": PATHS, "--workspace": ["{binary}"], "--mode": ["nonsense"],
                      "--memory": ["nonsense"]},
    "memory replay": {
        "--workspace": ["{missing}"],
        "--run": ["nonsense"],
        "--gamma": ["-1", "nan"],
        "--write-to": ["{empty}"],
        "--variant": ["nonsense"],
        "--limit": ["-1"],
    },
    "tasks list": {"directory": ["{missing}", "{binary}"], "--suite": ["nonsense"]},
    "tasks show": {"name": ["nonsense"], "--suite": ["nonsense"]},
    "tasks check": {"directory": ["{missing}"]},
    "log list": {
        "--workspace": ["{missing}"],
        "--run": ["nonsense"],
        "--status": ["nonsense"],
        "--limit": ["0"],
    },
    "log show": {"exchange_id": ["abc", "-1", "999999"], "--workspace": ["{missing}"]},
    "log search": {
        "query": ['"unbalanced', "AND", "a-b"],
        "--workspace": ["{missing}"],
        "--run": ["nonsense"],
        "--limit": ["0"],
    },
    "log tools": {"--workspace": ["{missing}"], "--run": ["nonsense"], "--limit": ["0"]},
    "audit adoptions": {
        "run": ["{missing}"],
        "--workspace": ["{missing}"],
        "--sample": ["0"],
        "--seed": ["-1"],
        "--rate": ["nonsense", "1=maybe"],
        "--ratings": PATHS,
        "--rater": ["\x1b]0;title\x07"],
    },
    "experiment run": {
        "what": ["nonsense", "{binary}", "{latin1}"],
        "--dir": ["{binary}"],
        "--workers": ["0"],
        "--devices": ["nonsense"],
        "--ray": ["nonsense"],
        "--model": ["nonsense"],
        "--suite": ["nonsense"],
        "--target": ["nonsense"],
        "--device": ["nonsense"],
        "--budget": ["0"],
        "--limit": ["0"],
        "--stream": ["nonsense"],
        "--memory": ["nonsense", "", BAD_PG],
    },
    "experiment status": {"directory": ["{missing}", "{binary}"]},
    "experiment report": {"directory": ["{missing}"], "--html": ["{empty}"], "--fast-p": ["-1", "nan"]},
    "experiment show": {"name": ["nonsense", "{binary}", "{latin1}"]},
}


#: Options that take any text: they are fed hostile text and must not fail with a traceback (any
#: exit status will do; the query of an empty log matches nothing).
FREE = {("log search", "query"), ("audit adoptions", "--rater"), ("run", "--exclude-run"),
        *(("memory list", o) for o in ("--run", "--model", "--target", "--device", "--operator", "--team"))}


def _commands() -> dict[str, Any]:
    found: dict[str, Any] = {}

    def walk(command: Any, path: list[str]) -> None:
        if hasattr(command, "list_commands"):
            ctx = type("Ctx", (), {})()
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name])
        else:
            found[" ".join(path)] = command

    walk(typer.main.get_command(app), [])
    return found


def _valued(command: Any) -> dict[str, Any]:
    """The parameters of `command` that take a value (flags have no bad value), by name."""
    out = {}
    for param in command.params:
        if getattr(param, "is_flag", False) or "--help" in param.opts:
            continue
        is_option = param.opts[0].startswith("-")
        out[param.opts[0] if is_option else param.name] = param
    return out


def test_every_option_of_every_command_has_bad_values() -> None:
    commands = _commands()
    assert set(BASE) == set(commands)
    missing = {name: sorted(set(_valued(cmd)) - set(BAD.get(name, {}))) for name, cmd in commands.items()}
    assert {name: m for name, m in missing.items() if m} == {}


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("cli-values")
    ws = root / "ws"
    db.connect(ws).close()
    (root / "empty").mkdir()
    (root / "binary").write_bytes(b"\x7fELF\x00\x01\x02binary\x00")
    (root / "binary.py").write_bytes(b"\x00\x01\x02\xff")
    (root / "latin1").write_bytes("caf\xe9 = 1\n".encode("latin-1"))
    (root / "kernel.c").write_text("void sage_kernel(void) {}\n")
    (root / "seed.jsonl").write_text("")
    (root / "exp.toml").write_text(EXPERIMENT)
    (root / "expdir").mkdir()
    return {
        "ws": str(ws),
        "empty": str(root / "empty"),
        "binary": str(root / "binary"),
        "binary_py": str(root / "binary.py"),
        "latin1": str(root / "latin1"),
        "missing": str(root / "missing"),
        "missing_dir_file": str(root / "no" / "such" / "dir" / "x.jsonl"),
        "kernel": str(root / "kernel.c"),
        "out": str(root / "out.jsonl"),
        "seed": str(root / "seed.jsonl"),
        "experiment": str(root / "exp.toml"),
        "expdir": str(root / "expdir"),
    }


def invoke(argv: list[str]) -> tuple[int, str, str]:
    """`sage ARGV` in this process: (exit status, stdout, stderr); an uncaught exception propagates."""
    out, err = io.StringIO(), io.StringIO()
    old_argv, old_stdin = sys.argv, sys.stdin
    sys.argv, sys.stdin = ["sage", *argv], io.StringIO("")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv, sys.stdin = old_argv, old_stdin
    return code, out.getvalue(), err.getvalue()


#: The first bad value of every option runs by default; the rest with -m slow (the run stays short).
CASES = [
    pytest.param(
        name, option, value, marks=() if i == 0 else pytest.mark.slow, id=f"{name}|{option}|{value[:20]}"
    )
    for name, options in BAD.items()
    for option, values in options.items()
    for i, value in enumerate(values)
]


@pytest.mark.parametrize(("name", "option", "value"), CASES)
def test_a_bad_value_is_refused_in_one_line_naming_it(
    places: dict[str, str], tmp_path: Path, name: str, option: str, value: str
) -> None:
    places = {**places, "fresh": str(tmp_path / "experiment")}
    value = value.format(**places)
    base = [a.format(**places) for a in BASE[name]]
    command = _commands()[name]
    param = _valued(command)[option]
    if option.startswith("-"):
        flags = set(param.opts)
        kept = []  # the base without this option's own value
        skip = False
        for arg in base:
            if skip:
                skip = False
                continue
            if arg in flags:
                skip = True
                continue
            kept.append(arg)
        argv = [*name.split(), *kept, option, value]
    else:
        positional = [p.name for p in command.params if not p.opts[0].startswith("-")]
        slots = [a for a in base if not a.startswith("-")][: len(positional)]
        rest = base[len(slots) :]
        given = dict(zip(positional, slots, strict=False))
        given[option] = value
        argv = [*name.split(), *[given[p] for p in positional if p in given], *rest]
    code, _, err = invoke(argv)
    lines = [line for line in err.splitlines() if line.strip()]
    if (name, option) in FREE:
        assert code in (0, 2) and all(line.startswith("error: ") for line in lines), (argv, code, err)
        return
    assert code == 2, (argv, code, err)
    assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err)
    names = {*param.opts, param.name or "", value}
    if option in ("more_files",):
        names.add(value)
    assert any(n and n in lines[0] for n in names), (argv, lines[0])
