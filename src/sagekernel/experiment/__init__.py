"""Experiments: the paper's matrices of streams as one command (`sage experiment`).

- `spec`        the experiment file (TOML) as typed records, with clear errors
- `presets`     the paper's experiments as shipped TOML files
- `plan`        the matrix expansion into named streams (each one `sage run`), donor order
- `layout`      the experiment directory: spec, plan, one workspace per stream
- `worker`      one stream in one process: memory from its donor, then `runner.run`
- `devices`     device slots and pinning (CUDA/NPU visibility, CPU affinity)
- `scheduler`   local workers: N child processes at once, donors first
- `ray_backend` the same on a Ray cluster (optional extra `.[ray]`)
- `status`      every stream's progress, read from its workspace
- `live`        the live view (a line per stream, or log lines when not a terminal)
- `tables`      the paper-shaped tables (Table 1, Table 2, Figure 5, Table 7, transfer, library)
- `html`        the experiment report as one HTML file
- `api`         `run_experiment`, the entry point of the CLI, the benchmark and tests
"""
