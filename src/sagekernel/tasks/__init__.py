"""Operator tasks: the task record, loading and validating task files, inputs and references, suites.

Modules: task.py (Task, TensorSpec and the file format), loader.py (load_task, load_dir),
infer.py (metadata for plain KernelBench files), inputs.py (build_inputs, make_model,
reference_outputs, distributions), modules.py (isolated imports, size rebinding), suites.py
(named suites, load_suite), suite/ (the built-in operators and their hand-written kernels).
"""
