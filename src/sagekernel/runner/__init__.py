"""Streams of operators (architecture.md `runner/`): schedules, the run store, resume, the
workspace lock, progress, and `run` -- the single writer of memory (runner/run.py)."""
