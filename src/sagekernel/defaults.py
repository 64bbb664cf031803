"""The defaults of the run's knobs, defined once (spec §14 where the spec has them).

`MemoryConfig`, `AgentConfig`, `RunConfig`, the `sage run` / `sage memory` options and the
memory functions all read these; nothing else spells the numbers. No imports: the CLI reads
this module before it loads anything heavy.
"""

from __future__ import annotations

#: T: refinement rounds per operator, shared by the corr and opt episodes (spec §1, SOURCED).
ROUNDS = 30
#: T for the embedded 1.5B model at ~5 tokens/s: one round (a ~400-token reply plus prompt
#: processing) takes ~1.5-2 min, so the 3-operator demo stays within ~25 min.
LOCAL_ROUNDS = 4
#: k: experiences retrieved per round (spec §3, DERIVED).
K = 5
#: γ: utility reranking strength (spec §3, SOURCED).
GAMMA = 0.3
#: B: resident-rule token budget (spec §1, SOURCED).
HOT_BUDGET = 10000
#: At most this many distilled items per episode (spec §5, RECONSTRUCTED).
MAX_NEW_ITEMS = 3
#: Trace-completeness re-asks per round before unresolved items stay ⊥ / the round fails PARSE.
MAX_REASKS = 2
#: Earlier attempts summarised in each prompt.
HISTORY = 4
#: Completion-token cap of one model call.
MAX_TOKENS = 2048
#: The cap for the embedded model: a demo kernel needs a few hundred tokens, and a 1.5B model
#: that loses the format would otherwise spend minutes filling 2048 tokens.
LOCAL_MAX_TOKENS = 1024
#: Sampling temperature of every agent call.
TEMPERATURE = 0.2


def for_model(model: str, driver: str = "builtin") -> dict[str, int]:
    """The defaults that depend on the model (RunConfig fields `budget`, `max_tokens_per_call`).

    The embedded `local` model gets LOCAL_MAX_TOKENS for every call it makes, and LOCAL_ROUNDS
    when it writes the kernels (driver "builtin"); under `sage mcp` a coding agent writes them and
    the local model only distils, so T stays the paper's."""
    local = model.strip().partition(":")[0] == "local"
    return {"budget": LOCAL_ROUNDS if local and driver == "builtin" else ROUNDS,
            "max_tokens_per_call": LOCAL_MAX_TOKENS if local else MAX_TOKENS}
