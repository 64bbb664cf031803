"""Experiment files: parsing into typed records, clear errors, the matrix expansion, donor order,
the presets, overrides and device slots. Nothing here runs a stream."""

from __future__ import annotations

import pytest

from sagekernel.devices import DeviceError, DeviceSlot, parse_devices
from sagekernel.experiment import presets
from sagekernel.experiment.plan import expand, order, recipients
from sagekernel.experiment.scheduler import check_workers
from sagekernel.experiment.spec import ExperimentSpecError, Overrides, parse
from sagekernel.runner.schedule import ScheduleError
from sagekernel.runner.schedule import order as schedule_order
from sagekernel.tasks.suites import load_suite

HEAD = """name = "t"
[models]
a = "scripted:/tmp/a.json"
b = "openai:m@http://localhost:1/v1"
[defaults]
budget = 3
"""


def spec(blocks: str, head: str = HEAD):  # type: ignore[no-untyped-def]
    return parse(head + blocks)


def test_matrix_expands_as_a_cross_product_with_names_from_the_template() -> None:
    s = spec("""
[[streams]]
methods = ["refinement", "sage"]
models = ["a", "b"]
schedules = ["given", "interleave:L2,L3"]
seeds = [0, 1]
""")
    streams = expand(s)
    assert len(streams) == 2 * 2 * 2 * 2
    names = {x.name for x in streams}
    assert "sage-b-interleave-L2-L3-s1" in names and "refinement-a-given-s0" in names
    one = next(x for x in streams if x.name == "sage-b-interleave-L2-L3-s1")
    assert (one.method, one.model, one.model_spec, one.schedule, one.seed, one.budget) == (
        "sage",
        "b",
        "openai:m@http://localhost:1/v1",
        "interleave:L2,L3",
        1,
        3,
    )
    cfg = one.config(__import__("pathlib").Path("/tmp/ws"))
    assert (
        cfg.run_id == one.name and cfg.budget == 3 and cfg.schedule == "interleave:L2,L3" and not cfg.frozen
    )


def test_scalars_block_settings_and_run_table_reach_the_run_config() -> None:
    s = spec("""
[run]
k = 3
embedder = "none"
[[streams]]
method = "sage"
model = "a"
budget = 7
limit = 2
suite = "demo"
run = { k = 5 }
""")
    (one,) = expand(s)
    cfg = one.config(__import__("pathlib").Path("/tmp/ws"))
    assert (cfg.budget, cfg.limit, cfg.suite, cfg.k, cfg.embedder) == (7, 2, "demo", 5, "none")


@pytest.mark.parametrize(
    ("blocks", "needle"),
    [
        ('[[streams]]\nmethods = ["sage"]\nmodels = ["zz"]\n', "model 'zz' is not defined in [models]"),
        ('[[streams]]\nmethods = ["sage"]\nmodels = ["a"]\ncolour = 1\n', "unknown key(s) ['colour']"),
        ('[[streams]]\nmodels = ["a"]\n', "no methods"),
        ('[[streams]]\nmethods = ["nope"]\nmodels = ["a"]\n', "unknown method 'nope'"),
        ('[[streams]]\nmethods = []\nmodels = ["a"]\n', "methods is an empty list"),
        ('[[streams]]\nmethods = ["sage", "sage"]\nmodels = ["a"]\n', "lists a value twice"),
        ('[[streams]]\nmethod = "sage"\nmethods = ["sage"]\nmodels = ["a"]\n', "not both"),
        ('[[streams]]\nmethods = ["sage"]\nmodels = ["a"]\nbudget = 0\n', "budget must be >= 1"),
        ('[[streams]]\nmethods = ["sage"]\nmodels = ["a"]\nmemory = "frozen"\n', "needs from ="),
        ('[[streams]]\nmethods = ["sage"]\nmodels = ["a"]\nfrom = "x"\nmemory = "melt"\n', "is not one of"),
        (
            '[[streams]]\nmethods = ["sage"]\nmodels = ["a"]\nfrom = "nobody"\nname = "r"\n',
            "from = 'nobody' names no stream",
        ),
        (
            '[[streams]]\nmethods = ["sage"]\nmodels = ["a"]\nrun = { budget = 3 }\n',
            "run may not set 'budget'",
        ),
        (
            '[[streams]]\nmethods = ["sage"]\nmodels = ["a"]\nrun = { k = -1 }\n',
            "stream 'sage-a-given-s0': k:",
        ),
        ('[[streams]]\nmethods = ["sage"]\nmodels = ["a"]\nrun = { colour = 1 }\n', "colour"),
        ('[[streams]]\nmethods = ["sage"]\nmodels = ["a"]\nname = "x/{method}"\n', "must be letters"),
        ('[[streams]]\nmethods = ["sage"]\nmodels = ["a"]\nname = "{colour}"\n', "template"),
        (
            '[[streams]]\nmethods = ["sage", "refinement"]\nmodels = ["a"]\nname = "same"\n',
            "two streams are named 'same'",
        ),
        (
            '[[streams]]\nmethods = ["sage"]\nmodels = ["a"]\nfrom = "x"\nmemory = "continue"\n'
            "frozen = true\n",
            "cannot be frozen",
        ),
    ],
)
def test_bad_streams_are_refused_with_a_message_naming_the_problem(blocks: str, needle: str) -> None:
    with pytest.raises(ExperimentSpecError) as err:
        expand(spec(blocks))
    assert needle in str(err.value)


def test_bad_files_are_refused() -> None:
    with pytest.raises(ExperimentSpecError, match="not valid TOML"):
        parse("name = ")
    with pytest.raises(ExperimentSpecError, match="name = "):
        parse("[models]\na='local'\n[[streams]]\nmethods=['sage']\nmodels=['a']\n")
    with pytest.raises(ExperimentSpecError, match=r"\[models\] must map"):
        parse("name='x'\n[[streams]]\nmethods=['sage']\n")
    with pytest.raises(ExperimentSpecError, match="no \\[\\[streams\\]\\]"):
        parse("name='x'\n[models]\na='local'\n")
    with pytest.raises(ExperimentSpecError, match="unknown top-level"):
        parse("extra = 1\n" + HEAD + "[[streams]]\nmethods=['sage']\nmodels=['a']\n")
    with pytest.raises(ExperimentSpecError, match="unknown model kind"):
        expand(parse("name='x'\n[models]\na='nonsense:1'\n[[streams]]\nmethods=['sage']\nmodels=['a']\n"))


def test_donors_come_first_and_cycles_are_refused() -> None:
    s = spec("""
[[streams]]
name = "late-{model}"
methods = ["sage"]
models = ["b"]
from = "early-a"
[[streams]]
name = "early-{model}"
methods = ["sage"]
models = ["a"]
[[streams]]
name = "replay-{model}"
methods = ["sage"]
models = ["a"]
from = "late-b"
memory = "replay:relevance"
""")
    streams = expand(s)
    assert [x.name for x in order(streams)] == ["early-a", "late-b", "replay-a"]
    assert [x.name for x in recipients(streams, "early-a")] == ["late-b", "replay-a"]
    late = next(x for x in streams if x.name == "late-b")
    assert late.memory == "frozen" and late.frozen  # `from` alone means a frozen evaluation
    replay = next(x for x in streams if x.name == "replay-a")
    assert (
        replay.config(__import__("pathlib").Path("w"), memory_from=__import__("pathlib").Path("d")).gamma
        == 0.0
    )
    with pytest.raises(ExperimentSpecError, match="cycle: x -> y -> x"):
        expand(
            spec("""
[[streams]]
name = "x"
methods = ["sage"]
models = ["a"]
from = "y"
[[streams]]
name = "y"
methods = ["sage"]
models = ["a"]
from = "x"
""")
        )


def test_every_preset_parses_and_expands_to_the_papers_matrix() -> None:
    assert set(presets.names()) == {
        "main-comparison",
        "schedules",
        "ablations",
        "transfer",
        "fixed-bank-replay",
        "cross-library",
        "oracle-method",
    }
    sizes = {name: len(expand(presets.load(name))) for name in presets.names()}
    assert sizes == {
        "main-comparison": 12,
        "schedules": 3,
        "ablations": 4,
        "transfer": 9,
        "fixed-bank-replay": 4,
        "cross-library": 6,
        "oracle-method": 60,
    }
    transfer = order(expand(presets.load("transfer")))
    names = [s.name for s in transfer]
    assert names.index("sage-glm") < names.index("sage-qwen-from-glm")
    assert names.index("sage-qwen") < names.index("sage-qwen-native")
    replay = {s.name: s for s in expand(presets.load("fixed-bank-replay"))}
    assert replay["replay-atu-glm"].replay_variant == "atu" and replay["replay-atu-glm"].donor == "sage-glm"
    library = {s.name: s for s in expand(presets.load("cross-library"))}
    assert library["sage-glm-library"].memory == "continue" and not library["sage-glm-library"].frozen


def test_overrides_replace_models_and_force_block_settings() -> None:
    s = presets.load(
        "ablations",
        Overrides(models={"glm": "scripted:/tmp/x.json"}, blocks={"budget": 4, "suite": "demo", "limit": 1}),
    )
    streams = expand(s)
    assert {x.model_spec for x in streams} == {"scripted:/tmp/x.json"}
    assert {(x.budget, x.suite, x.limit) for x in streams} == {(4, "demo", 1)}
    with pytest.raises(ExperimentSpecError, match="no model labelled 'gpt'"):
        presets.load("ablations", Overrides(models={"gpt": "local"}))
    with pytest.raises(ExperimentSpecError, match="no experiment file or preset named"):
        presets.load("nonexistent")


def test_levels_schedule_runs_the_listed_levels_one_after_another() -> None:
    tasks = load_suite("builtin")
    planned = schedule_order(tasks, "levels:L2,L3")
    levels = [t.level for t in planned]
    assert levels == sorted(levels) and set(levels) == {2, 3}
    assert len(planned) == sum(t.level in (2, 3) for t in tasks)
    mixed = [t.level for t in schedule_order(tasks, "interleave:L2,L3")]
    assert mixed[:2] == [2, 3]
    with pytest.raises(ScheduleError, match="distinct levels"):
        schedule_order(tasks, "levels:L2,L2")


def test_device_slots_parse_and_two_streams_never_share_one() -> None:
    assert parse_devices(["cuda:0,1"]) == [DeviceSlot("cuda", (0,)), DeviceSlot("cuda", (1,))]
    assert parse_devices(["npu:3"])[0].env() == {"ASCEND_RT_VISIBLE_DEVICES": "3"}
    assert parse_devices(["gpu:2"])[0].env()["CUDA_VISIBLE_DEVICES"] == "2"
    cpu = parse_devices(["cpu:0-1"])
    assert cpu == [DeviceSlot("cpu", (0, 1))] and cpu[0].env()["OMP_NUM_THREADS"] == "2"
    assert parse_devices(["cpu:0+1"])[0].cores() == {0, 1}
    with pytest.raises(DeviceError, match="two streams must never share"):
        parse_devices(["cuda:0", "cuda:0"])
    with pytest.raises(DeviceError, match="never share"):
        parse_devices(["cpu:0-1,1"])
    with pytest.raises(DeviceError, match="cannot use"):
        parse_devices(["cpu:4096"])
    with pytest.raises(DeviceError, match="write cuda:0,1"):
        parse_devices(["tpu:0"])
    with pytest.raises(DeviceError, match="needs 3 device slots"):
        check_workers(3, parse_devices(["cuda:0,1"]))
    check_workers(3, [])  # no slots: no pinning, any number of workers


def test_block_run_tables_merge_into_the_experiments_by_key() -> None:
    s = spec("""
[run]
k = 3
[run.harness]
iters = 20
warmup = 2
[[streams]]
method = "sage"
model = "a"
run = { harness = { iters = 5 } }
""")
    (one,) = expand(s)
    assert one.run == {"k": 3, "harness": {"iters": 5, "warmup": 2}}
