"""The device runtime loop shared by the Triton and CUDA runtimes (runs inside the sandbox).

`loop.py` imports torch and the harness's `wire_child.py` only, never sagekernel: the runtimes
add this directory to `sys.path` from their bound location and import `loop` directly.
"""
