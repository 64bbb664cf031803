"""What the model is told about the CPU target must itself be right: every complete kernel in the
worked example compiles under the target's own flags."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from sagekernel.targets import get_target


def test_worked_example_kernels_compile(tmp_path: Path) -> None:
    example = get_target("cpu").knowledge().example
    blocks = [b for b in re.findall(r"```c\n(.*?)```", example, re.S) if "{" in b and "sage_kernel" in b]
    assert len(blocks) >= 2
    for n, block in enumerate(blocks):
        src = tmp_path / f"k{n}.c"
        src.write_text(block)
        done = subprocess.run(["gcc", "-std=c11", "-O2", "-fopenmp", "-Wall", "-Werror", "-fsyntax-only",
                               str(src)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
