"""The learning memory: items, store, retrieval with utility reranking, ATU and UGC (spec §1–§6).

Single-writer rule: only the runner's thread writes memory, through `MemoryPolicy.learn` (one
transaction per episode), plus `load_seed` / `import_jsonl` before a run. Everything else reads.

Public entry points: `policies.make_policy`, `policies.METHODS`, `io.load_seed`,
`io.export_jsonl`, `io.import_jsonl`, `store.Store`, `replay.replay` (the workspace replay:
`runner/bank_replay.py`),
`simulate.simulate`. Spec choices: docs/spec_choices.md.
"""
