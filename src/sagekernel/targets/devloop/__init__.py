"""The device runtime loop shared by the Triton and CUDA runtimes (runs inside the sandbox).

`loop.py`, `devices.py` and `hostguard.py` import torch and the harness's stdlib `wire_child.py`
and `guard.py` only, never sagekernel: targets/device_host.py stages them, with a target's own
runtime files, into one folder that the sandbox binds, and the runtime imports them from there.
The harness (harness/runs.py with runtime_evidence.py) judges everything they report.
"""
