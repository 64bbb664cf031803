"""Operator tasks: the task record, loading and validating task files, inputs and references, suites.

Modules: task.py (Task, TensorSpec, ForwardArg, InputGroup and the file format), loader.py
(load_task, load_dir), metadata.py (SAGE_TASK validation), infer.py (metadata for plain KernelBench
files), groups.py (get_input_groups files), layout.py (level/category from folders), sizepolicy.py
(scaling published shapes to a CPU budget), params.py (model parameters as kernel arguments),
inputs.py (build_inputs, the file's hooks, distributions), reference.py (make_model,
reference_outputs, param_tensors), modules.py (isolated imports, size rebinding, companion files,
device packages), isolate.py and isolate_child.py (loading in a limited child), record.py (a Task
as JSON, LoadProblem), suites.py (named suites, load_suite), suite/ (the built-in
operators and their hand-written kernels). Formats users bring: docs/task_formats.md.
"""
