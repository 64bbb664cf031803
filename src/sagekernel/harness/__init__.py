"""compile -> correctness -> timing in a sandbox, the anti-hacking checks, the verdict record."""

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.verdict import LintFinding, Stage, Verdict

__all__ = ["HarnessConfig", "LintFinding", "Stage", "Verdict", "evaluate"]


def __getattr__(name: str) -> object:
    # `evaluate` imports torch and the task loader; keep `import sagekernel.harness` light.
    if name == "evaluate":
        from sagekernel.harness.evaluate import evaluate

        return evaluate
    raise AttributeError(name)
