"""The CPU target (C/C++ kernels): contract, build, lint, knowledge files, seed memory."""

from sagekernel.targets.cpu.target import CpuTarget

__all__ = ["CpuTarget"]
