"""The kernel-only template's tiling computation is plain C++: compile the reference ones with g++
against the rendered skeleton header and check the partition they produce for every shape."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from sagekernel.targets.ascendc.contract import kernel_only_fields
from sagekernel.targets.ascendc.names import op_names
from sagekernel.targets.ascendc.skeleton import plain_tiling_header

from .conftest import reference_candidate

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")

DRIVER = r"""
#include <cstdio>
#include <cstdlib>
#include "{snake}_tiling.h"
void Compute{op}Tiling({struct}& t, uint32_t coreNum, uint64_t ubBytes);
int main(int argc, char** argv) {{
    {struct} t{{}};
    t.totalLength = std::atoll(argv[1]);
    Compute{op}Tiling(t, std::atoi(argv[2]), std::atoll(argv[3]));
    std::printf("%u %lld %lld %lld %lld\n", t.usedCoreNum, (long long)t.formerNum, (long long)t.formerLength,
                (long long)t.tailLength, (long long)t.tileLength);
    return 0;
}}
"""


@pytest.mark.parametrize("name", ["abs", "mul_sigmoid"])
def test_reference_tiling_partitions_every_shape(tmp_path, tasks, name):
    task = tasks[name]
    n = op_names(task)
    (tmp_path / f"{n.snake}_tiling.h").write_text(plain_tiling_header(task, kernel_side=False))
    (tmp_path / "tiling.cpp").write_text(reference_candidate(name).files[n.tiling_func_file])
    (tmp_path / "main.cpp").write_text(DRIVER.format(snake=n.snake, op=n.op_type, struct=n.tiling_struct))
    exe = tmp_path / "tiling"
    subprocess.run(
        [
            "g++",
            "-std=c++17",
            "-Wall",
            "-Werror",
            "-I",
            str(tmp_path),
            str(tmp_path / "tiling.cpp"),
            str(tmp_path / "main.cpp"),
            "-o",
            str(exe),
        ],
        check=True,
        capture_output=True,
    )
    totals = {t.numel(s) for s in task.all_shapes() for t in task.outputs} | {1, 7, 8, 9, 10**7}
    for total in sorted(totals):
        for cores in (1, 8, 48):
            out = subprocess.run(
                [str(exe), str(total), str(cores), str(192 * 1024)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()
            used, former_num, former_len, tail_len, tile = map(int, out)
            assert 1 <= used <= cores
            covered = former_num * former_len + (used - former_num) * tail_len
            assert covered == (total + 7) // 8 * 8, (total, cores, out)  # whole 32-byte blocks, all covered
            assert used <= (total + 7) // 8  # no block launched without work
            assert former_len % 8 == 0 and tail_len % 8 == 0 and tile % 8 == 0 and tile > 0
            queues = 3 if len(task.inputs) == 2 else 2
            assert queues * 2 * tile * 4 <= 192 * 1024  # double-buffered queues fit in UB


def test_plain_header_is_whole_words_and_compiles(tmp_path, tasks):
    for task in tasks.values():
        n = op_names(task)
        (tmp_path / "h.h").write_text(plain_tiling_header(task, kernel_side=False))
        (tmp_path / "c.cpp").write_text(
            '#include "h.h"\n'
            + "".join(
                f'static_assert(sizeof({n.tiling_struct}::{f.name}) > 0, "");\n'
                for f in kernel_only_fields(task)
            )
        )
        subprocess.run(
            ["g++", "-std=c++17", "-fsyntax-only", "-I", str(tmp_path), str(tmp_path / "c.cpp")],
            check=True,
            capture_output=True,
        )
