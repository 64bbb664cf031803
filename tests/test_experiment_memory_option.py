"""`sage experiment run --memory URL` (experiment/plan.py `_shared_memory`): every stream without a
donor learns into the shared memory, as `memory` in the file's [run] would make it; streams with a
donor keep the memory their mode gives them; a spec that names another memory for a stream is
refused, as is a stream with a donor that names one. The option is stored with the experiment, so
continuing the directory rebuilds the same streams. (Runs against a server: test_shared_memory_*.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from experiment_support import write_spec
from sagekernel.experiment.api import resolve
from sagekernel.experiment.layout import ExperimentDir
from sagekernel.experiment.plan import expand
from sagekernel.experiment.spec import ExperimentSpecError, Overrides, load

URL = "postgresql://sage:secret@db.example:5432/sage"
OTHER = "postgresql://sage:secret@db.example:5432/elsewhere"

LEARNING = """
[[streams]]
name = "{method}-learn"
methods = ["sage", "refinement"]
models = ["scripted"]
"""
BLOCKS = LEARNING + """
[[streams]]
name = "sage-transfer"
methods = ["sage"]
models = ["scripted"]
from = "sage-learn"
"""


def _streams(path: Path, memory: str | None) -> dict[str, dict[str, object]]:
    return {s.name: s.run for s in expand(load(path, Overrides(memory=memory)))}


def test_the_option_reaches_every_stream_without_a_donor(tmp_path: Path) -> None:
    learning = write_spec(tmp_path / "learning.toml", LEARNING)
    runs = _streams(learning, URL)
    assert runs == {name: {**r, "memory": URL} for name, r in _streams(learning, None).items()}
    assert set(runs) == {"sage-learn", "refinement-learn"}


def test_a_donor_that_learns_into_a_shared_memory_is_refused(tmp_path: Path) -> None:
    transfer = write_spec(tmp_path / "transfer.toml", BLOCKS)
    assert all("memory" not in r for r in _streams(transfer, None).values())
    # its recipient would start from the donor's workspace memory, which stays empty
    with pytest.raises(ExperimentSpecError, match="'sage-learn' learns into the shared memory"):
        _streams(transfer, URL)
    shared = f'name = "{{method}}-learn"\nrun = {{ memory = "{OTHER}" }}'
    in_file = BLOCKS.replace('name = "{method}-learn"', shared)
    with pytest.raises(ExperimentSpecError, match="'sage-learn' learns into the shared memory"):
        _streams(write_spec(tmp_path / "in_file.toml", in_file), None)


def test_the_spec_naming_the_same_memory_agrees_and_another_is_refused(tmp_path: Path) -> None:
    named = 'run = { memory = "postgresql://sage@db.example:5432/sage" }'
    same = LEARNING.replace('name = "{method}-learn"', f'name = "{{method}}-learn"\n{named}')
    runs = _streams(write_spec(tmp_path / "same.toml", same), URL)
    assert runs["sage-learn"]["memory"] == URL  # the option's URL, with its password, is used
    other = same.replace("5432/sage", "5432/elsewhere")
    with pytest.raises(ExperimentSpecError, match="disagrees") as err:
        _streams(write_spec(tmp_path / "other.toml", other), URL)
    assert "--memory" in str(err.value) and "elsewhere" in str(err.value) and "secret" not in str(err.value)


@pytest.mark.parametrize("mode", ["frozen", "continue"])
def test_a_stream_with_a_donor_cannot_also_name_a_shared_memory(tmp_path: Path, mode: str) -> None:
    blocks = BLOCKS.replace('from = "sage-learn"', f'from = "sage-learn"\nmemory = "{mode}"\n'
                            f'run = {{ memory = "{OTHER}" }}')
    with pytest.raises(ExperimentSpecError, match="cannot also learn into a shared memory"):
        _streams(write_spec(tmp_path / "exp.toml", blocks), None)


def test_the_option_is_stored_and_a_directory_continues_with_it(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "exp.toml", LEARNING)
    _, streams = resolve(spec, Overrides(memory=URL), tmp_path / "run")
    assert {s.name: s.run.get("memory") for s in streams}["sage-learn"] == URL
    again = ExperimentDir(tmp_path / "run")
    assert {s.name: s.run.get("memory") for s in expand(again.spec())}["sage-learn"] == URL
    # continuing the directory as the CLI does (no override given: every block value None)
    _, continued = resolve(tmp_path / "run", Overrides(blocks=dict.fromkeys(("suite", "limit"))))
    assert [s.run for s in continued] == [s.run for s in streams]
    with pytest.raises(ExperimentSpecError, match="settings it was created with"):
        resolve(tmp_path / "run", Overrides(memory=OTHER))
