"""One operator's trajectory (architecture.md `agent/`): the loop (loop.py), prompt assembly from
templates (prompt.py), the reply protocol (protocol.py), the trace-completeness gate (gate.py) and
experience distillation (distill.py). The agent never writes memory; the runner does."""
