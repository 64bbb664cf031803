"""`--memory` in a run's configuration: a PostgreSQL URL only, stored without its password, not
part of the run's identity, and a resume must name the memory the run learned into."""

from __future__ import annotations

import pytest

from sagekernel.errors import SageError
from sagekernel.memory.backend import redact
from sagekernel.runner.config import RunConfig
from sagekernel.runner.run import _same_memory

URL = "postgresql://sage:s3cret@db.example:5432/team"


def test_the_memory_url_is_stored_without_its_password() -> None:
    cfg = RunConfig(memory=URL)
    assert redact(URL) == "postgresql://sage:***@db.example:5432/team"
    assert cfg.stored()["memory"] == redact(URL) and "s3cret" not in str(cfg.stored())
    assert cfg.key() == RunConfig().key()  # where the memory lives is not what the run computes


def test_bad_memory_settings_are_refused() -> None:
    with pytest.raises(SageError, match="not a PostgreSQL URL"):
        RunConfig(memory="mysql://x/db")
    with pytest.raises(SageError, match="two memories"):
        RunConfig(memory=URL, memory_from="elsewhere", frozen=True)
    with pytest.raises(SageError, match="unknown provenance field"):
        RunConfig(retrieve_only={"colour": "red"})


def test_a_resume_names_the_memory_the_run_learned_into() -> None:
    stored = RunConfig(memory=URL).stored()
    _same_memory(stored, RunConfig(memory=URL))
    _same_memory(stored, RunConfig(memory="postgresql://sage:other@db.example:5432/team"))  # new password
    with pytest.raises(SageError, match="same memory"):
        _same_memory(stored, RunConfig())
    with pytest.raises(SageError, match="same memory"):
        _same_memory(RunConfig().stored(), RunConfig(memory=URL))
