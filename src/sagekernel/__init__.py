"""SAGE: a persistent, self-improving agent that writes and optimises compute kernels.

Module map (see docs/design/architecture.md): tasks/ (operator tasks), targets/ (backends),
harness/ (compile -> correctness -> timing, sandbox, lint), models/ (the only LLM boundary),
agent/ (one operator's trajectory), memory/ (items, retrieval, ATU, UGC), runner/ (streams),
report/ (metrics and reports), cli/ (the `sage` command).
"""

__version__ = "0.1.0"
