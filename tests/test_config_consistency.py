"""The defaults of every run knob agree everywhere (KernelAgent's consistency guard): the options of
`sage run` and `sage mcp`, RunConfig, the configs it builds (agent, memory, harness), an experiment
stream, and the docs that quote them."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from sagekernel import defaults
from sagekernel.agent.loop import AgentConfig
from sagekernel.cli.mcp import mcp_command
from sagekernel.cli.run import run_command
from sagekernel.cli.run_options import SHAPED, run_config, settings_table
from sagekernel.experiment.plan import expand
from sagekernel.experiment.spec import parse
from sagekernel.harness.config import HarnessConfig
from sagekernel.memory.records import MemoryConfig
from sagekernel.runner.config import BLOCK, MCP, RUN, TABLE, RunConfig, knobs, model_dependent

ROOT = Path(__file__).parents[1]
API = "openai:m@http://localhost:1/v1"
COMMANDS = {RUN: run_command, MCP: mcp_command}


def cli_defaults(command: Any) -> dict[str, Any]:
    """The typer default of each option of a command, by parameter name."""
    return {name: p.default.default for name, p in inspect.signature(command).parameters.items()
            if hasattr(p.default, "default")}


def field_default(name: str) -> Any:
    return RunConfig.model_fields[name].get_default(call_default_factory=True)


@pytest.mark.parametrize("surface", [RUN, MCP])
def test_each_command_offers_its_knobs_with_runconfigs_defaults(surface: str) -> None:
    cli = cli_defaults(COMMANDS[surface])
    for name in knobs(surface):
        if name in SHAPED:
            assert all(o.name in cli for o in SHAPED[name])
        elif model_dependent(name):
            assert cli[name] is None  # resolved from the model by RunConfig, not by the command
        else:
            assert cli[name] == field_default(name), name


@pytest.mark.parametrize("model", ["local", API, "scripted:/tmp/replies.jsonl"])
@pytest.mark.parametrize("driver", ["builtin", "mcp"])
def test_model_dependent_defaults_are_resolved_in_runconfig(model: str, driver: str) -> None:
    cfg = RunConfig(model=model, driver=driver)
    assert {"budget": cfg.budget, "max_tokens_per_call": cfg.max_tokens_per_call} == \
        defaults.for_model(model, driver)
    assert RunConfig(model=model, driver=driver, budget=7).budget == 7  # a given value wins


@pytest.mark.parametrize("surface", [RUN, MCP])
@pytest.mark.parametrize("model", ["local", API])
def test_a_command_and_runconfig_build_the_same_config(surface: str, model: str) -> None:
    cli = cli_defaults(COMMANDS[surface])
    own = {"as_json", "http", "port", "token_env"}
    fixed = {"driver": "mcp", "progress": False} if surface == MCP else {}
    from_cli = run_config({k: v for k, v in cli.items() if k not in own} | {"model": model}, **fixed)
    assert from_cli.stored() == RunConfig(model=model, **fixed).stored()


@pytest.mark.parametrize("model", ["local", API])
def test_an_experiment_stream_runs_with_sage_runs_settings(model: str) -> None:
    """The same model in an experiment gets `sage run --model`'s budget, reply cap and every other
    default (an experiment with the local model once ran with T=30 and 2048-token replies)."""
    spec = parse(f'name = "x"\n[models]\nm = "{model}"\n[[streams]]\nmethods = ["sage"]\nmodels = ["m"]\n')
    [stream] = expand(spec)
    got = stream.config(Path("ws")).stored()
    want = RunConfig(workspace=Path("ws"), model=model, run_id=stream.name, progress=False).stored()
    assert got == want
    assert stream.budget == defaults.for_model(model)["budget"]


def test_the_experiment_keys_are_runconfigs() -> None:
    assert set(knobs(TABLE)) | set(knobs(BLOCK)) <= set(RunConfig.model_fields)
    assert not set(knobs(TABLE)) & set(knobs(BLOCK))  # each key has one place in an experiment file
    from sagekernel.experiment.spec import LIST_KEYS, SCALAR_KEYS
    block_keys = set(LIST_KEYS.values()) | set(SCALAR_KEYS) - {"name", "from", "memory"}
    assert block_keys == set(knobs(BLOCK))


def test_the_configs_built_from_runconfig_carry_its_values_and_share_its_defaults() -> None:
    cfg = RunConfig(model=API)
    agent = cfg.agent_config()
    assert agent == AgentConfig()  # the agent's own defaults are an API model's run defaults
    assert (agent.rounds, agent.k, agent.max_reasks, agent.history, agent.max_tokens, agent.temperature) == \
        (cfg.budget, cfg.k, cfg.max_reasks, cfg.history, cfg.max_tokens_per_call, cfg.temperature)
    memory = cfg.memory_config()
    assert memory == MemoryConfig()  # the spec's constants untouched, the run's knobs at their defaults
    assert (memory.gamma, memory.k, memory.budget_tokens, memory.max_new_items) == \
        (cfg.gamma, cfg.k, cfg.hot_budget, cfg.max_new_items)
    assert memory.pool_size(cfg.k) == 3 * cfg.k  # K′ = 3k (spec §3)
    assert cfg.harness_config() == HarnessConfig()
    changed = RunConfig(model=API, k=30, gamma=0.0, hot_budget=5, max_new_items=7, budget=2, history=1)
    m, a = changed.memory_config(), changed.agent_config()
    assert (m.k, m.gamma, m.budget_tokens, m.max_new_items, m.pool_size(30)) == (30, 0.0, 5, 7, 90)
    assert (a.k, a.rounds, a.history) == (30, 2, 1)


def test_the_docs_quote_the_code() -> None:
    assert (ROOT / "docs/settings.md").read_text(encoding="utf-8") == settings_table(), \
        "regenerate: PYTHONPATH=src python3 -m sagekernel.cli.run_options > docs/settings.md"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quoted = re.search(r"`--budget T` \(default (\d+), the paper's T; (\d+) for the embedded model\)", readme)
    assert quoted is not None
    assert (int(quoted[1]), int(quoted[2])) == (defaults.for_model(API)["budget"],
                                                defaults.for_model("local")["budget"])
    choices = (ROOT / "docs/spec_choices.md").read_text(encoding="utf-8")
    assert "K′ = 15" not in choices and "K′ = 3k" in choices
