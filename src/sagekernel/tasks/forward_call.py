"""Forward signatures with keyword-only parameters, called the KernelBench way.

MultiKernelBench's NPUKernelBench conversion declares ``forward(self, query, key, weights, *,
layout_query="BSND", sparse_count=2048, ...)`` and its ``get_input_groups()`` lists every argument
positionally, in declaration order. Every caller in SAGE (loader, harness, reference runners) calls
``model(*args)``; `accept_positional_keywords` gives such a file's Model a forward that passes
the arguments beyond the positional parameters to the keyword-only ones, in declaration order, so
those callers need no change. The wrapper's signature lists every parameter as positional, so
attrs are named after them (``layout_query``, ``sparse_count``).
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any


def keyword_only_names(cls: type) -> tuple[list[str], list[str]]:
    """(positional parameter names after self, keyword-only parameter names) of ``cls.forward``."""
    try:
        params = list(inspect.signature(getattr(cls, "forward")).parameters.values())  # noqa: B009
    except (TypeError, ValueError, AttributeError):
        return [], []
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][1:]
    keywords = [p.name for p in params if p.kind is p.KEYWORD_ONLY]
    return positional, keywords


def accept_positional_keywords(module: ModuleType) -> None:
    """Give ``module.Model`` a forward taking its keyword-only arguments positionally (module
    docstring); files whose forward has no keyword-only parameter are left alone."""
    cls = getattr(module, "Model", None)
    if not isinstance(cls, type):
        return
    positional, keywords = keyword_only_names(cls)
    original = getattr(cls, "forward")  # noqa: B009 (a type has no declared forward)
    kinds = [p.kind for p in inspect.signature(original).parameters.values()] if keywords else []
    if not keywords or inspect.Parameter.VAR_POSITIONAL in kinds:
        return
    n = len(positional)

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        extra = dict(zip(keywords, args[n:], strict=False))
        return original(self, *args[:n], **extra, **kwargs)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in positional]
    params += [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)
               for name in keywords]
    forward.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    forward.__doc__ = original.__doc__
    # The class itself is patched (this module object is private to the loader): a subclass under
    # the name Model would recurse through the file's own ``super(Model, self).__init__()``.
    cls.forward = forward  # type: ignore[attr-defined]
