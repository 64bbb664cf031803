"""The sandbox layers: timeout kills the whole group, the result channel needs the nonce, no network."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from sagekernel import sandbox
from sagekernel.harness.wire import FrameStream

KINDS = [k for k in ("bwrap", "process") if k != "bwrap" or sandbox.bwrap_works()]


def _script(tmp_path: Path, body: str) -> sandbox.SandboxCommand:
    (tmp_path / "box").mkdir(exist_ok=True)
    (tmp_path / "box" / "s.py").write_text(body)
    return sandbox.SandboxCommand(
        argv=[*sandbox.python_argv("/box/code/s.py")], ro_binds=[(str(tmp_path / "box"), "/box/code")]
    )


@pytest.mark.parametrize("kind", KINDS)
def test_timeout_kills_grandchildren(tmp_path: Path, kind: str) -> None:
    cmd = _script(tmp_path, "import os, time\nif os.fork() == 0:\n    time.sleep(60)\ntime.sleep(60)\n")
    (tmp_path / "s").mkdir()
    t0 = time.perf_counter()
    res = sandbox.run(cmd, kind=kind, limits=sandbox.Limits(wall_s=1.0), scratch_dir=tmp_path / "s")
    assert res.timed_out and time.perf_counter() - t0 < 10


@pytest.mark.parametrize("kind", KINDS)
def test_channel_frames_need_the_nonce(tmp_path: Path, kind: str) -> None:
    site = sandbox.site_paths()
    body = (
        f"import sys, os\nsys.path.insert(0, '/box/children'); sys.path.extend({site!r})\n"
        "from wire_child import Channel\n"
        "Channel(int(os.environ['SAGE_RESULT_FD']), 'abc').send({'kind': 'x'}, b'pay')\n"
        "Channel(int(os.environ['SAGE_RESULT_FD']), 'forged').send({'kind': 'y'})\n"
    )
    cmd = _script(tmp_path, body)
    children = Path(sandbox.__file__).resolve().parent / "harness" / "children"
    cmd.ro_binds.append((str(children), "/box/children"))
    if kind != "bwrap":
        cmd.argv = [a.replace("/box/children", str(children)) for a in cmd.argv]
        body = body.replace("/box/children", str(children))
        (tmp_path / "box" / "s.py").write_text(body)
    (tmp_path / "s").mkdir()
    res = sandbox.run(cmd, kind=kind, limits=sandbox.Limits(wall_s=20), scratch_dir=tmp_path / "s")
    parsed = FrameStream("abc")
    parsed.feed(res.channel)
    assert [f.record["kind"] for f in parsed.frames] == ["x"] and parsed.frames[0].payload == b"pay"
    assert parsed.problem == "a frame with a wrong nonce"


@pytest.mark.skipif(not sandbox.bwrap_works(), reason="bubblewrap unavailable")
def test_bwrap_has_no_network_and_a_read_only_view(tmp_path: Path) -> None:
    body = (
        "import socket, os\n"
        "try:\n    socket.create_connection(('1.1.1.1', 80), timeout=2); print('NET')\n"
        "except OSError:\n    print('nonet')\n"
        "print('etc' if os.path.exists('/etc/passwd') else 'noetc')\n"
        f"print('home' if os.path.exists({str(Path(__file__).resolve())!r}) else 'nowork')\n"
        "try:\n    open('/usr/x', 'w'); print('RW')\nexcept OSError:\n    print('ro')\n"
    )
    cmd = _script(tmp_path, body)
    (tmp_path / "s").mkdir()
    res = sandbox.run(cmd, kind="bwrap", limits=sandbox.Limits(wall_s=20), scratch_dir=tmp_path / "s")
    assert res.output_tail.split() == ["nonet", "noetc", "nowork", "ro"], res.output_tail
    assert sys.executable  # the interpreter itself was visible
