"""Names derived from a task: op AddCustom <-> files add_custom* <-> aclnnAddCustom <-> kernel add_custom.

msOpGen turns an op type in CamelCase into snake_case file names and the kernel entry; the
generated aclnn API is `aclnn<OpType>` in `aclnn_<snake>.h`. Everything here is derived from the
task's name so the contract, the skeleton, the lint and the build plans agree by construction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sagekernel.tasks.task import Task

#: Suffix every SAGE operator carries, as the CANN samples do (AddCustom), so a custom op never
#: collides with a built-in op of the same name in the op library.
OP_SUFFIX = "Custom"


def camel_from_snake(name: str) -> str:
    """`cast_f32_f16_sat` -> `CastF32F16Sat`."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[_\W]+", name) if part)


def snake_from_camel(name: str) -> str:
    """msOpGen's rule: an underscore before an upper-case letter that follows a lower-case
    letter or a digit, or that starts a new word after an acronym; then lower-case."""
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return s.lower()


@dataclass(frozen=True)
class OpNames:
    """Every name that must agree for one operator."""

    op_type: str  # AddCustom
    snake: str  # add_custom: file stem and kernel entry
    tiling_struct: str  # AddCustomTilingData
    aclnn: str  # aclnnAddCustom
    aclnn_header: str  # aclnn_add_custom.h
    launch_header: str  # aclrtlaunch_add_custom.h (direct launch)
    python_module: str  # sage_add_custom (the torch extension the runtime imports)

    @property
    def kernel_entry(self) -> str:
        return self.snake

    @property
    def kernel_file(self) -> str:
        return f"op_kernel/{self.snake}.cpp"

    @property
    def host_file(self) -> str:
        return f"op_host/{self.snake}.cpp"

    @property
    def tiling_header(self) -> str:
        return f"op_host/{self.snake}_tiling.h"

    @property
    def tiling_func_file(self) -> str:
        """Kernel-only template: the model's tiling computation (host C++)."""
        return f"op_host/{self.snake}_tiling_func.cpp"

    @property
    def kernel_tiling_header(self) -> str:
        """Kernel-only template: the fixed plain-struct tiling header the kernel includes."""
        return f"op_kernel/{self.snake}_tiling.h"

    @property
    def op_json(self) -> str:
        return f"{self.snake}.json"


def op_names(task: Task) -> OpNames:
    op_type = camel_from_snake(task.name) + OP_SUFFIX
    snake = snake_from_camel(op_type)
    return OpNames(
        op_type=op_type,
        snake=snake,
        tiling_struct=f"{op_type}TilingData",
        aclnn=f"aclnn{op_type}",
        aclnn_header=f"aclnn_{snake}.h",
        launch_header=f"aclrtlaunch_{snake}.h",
        python_module=f"sage_{snake}",
    )


__all__ = ["OP_SUFFIX", "OpNames", "camel_from_snake", "op_names", "snake_from_camel"]
