"""The Ascend C runtime program (ascendc_runtime.py) runs inside the sandboxed child; it imports
nothing from sagekernel (docs/target_seam.md)."""
