"""Reports: the paper's metrics, tables and figures from any set of recorded runs.

- `load`           read-only loading of runs from workspace databases into records
- `metrics`        CR, ER (per level), Fast_p, S_self, speedups, spend: pure functions (spec §8)
- `memory_metrics` items by state, resident set, utility, adoption rate, most adopted
- `build`          one `RunReport` per run, Table 1 ordering, notes, JSON and CSV
- `tables`         cell text and the Rich terminal rendering
- `html`           the self-contained HTML report (plotly, inlined) from `report.html`

Nothing here writes to a store (architecture.md: report/ must not mutate any store).
"""
