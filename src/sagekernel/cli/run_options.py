"""The options of `sage run` and `sage mcp`, built from the RunConfig fields they expose.

A knob is declared once, as a RunConfig field (runner/config.py): its type, default, range and
help. `run_options(surface)` turns the fields a command exposes into typer options, so the two
commands cannot disagree with each other or with RunConfig about a default or a help text; the
values are checked by RunConfig itself (`run_config`), so every range is one rule, named in one
line by its option. Three fields are given in another shape on the command line: `harness`
(--harness KEY=VALUE, and --baseline for its `baseline` setting), `retrieve_only`
(--retrieve-only KEY=VALUE) and `model_options` (--model-config FILE and --model-opt KEY=VALUE).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import typer

from sagekernel import defaults
from sagekernel.errors import SageError


@dataclass(frozen=True)
class ShapedOption:
    """A command-line option that feeds a RunConfig field in another shape."""

    name: str
    annotation: Any
    flag: str
    default: Any
    help: str


#: RunConfig field -> the options that give it.
SHAPED: dict[str, tuple[ShapedOption, ...]] = {
    "harness": (ShapedOption("harness", list[str], "--harness", [],
                             "Harness override KEY=VALUE (repeatable), e.g. --harness iters=20; part of the "
                             "run's identity."),
                ShapedOption("baseline", str, "--baseline", "eager",
                             "What speedups are over: eager (PyTorch as written), compile (torch.compile), "
                             "best (the faster of the two per round); cpu target only for compile/best. "
                             "The harness setting `baseline`.")),
    "model_options": (
        ShapedOption("model_config", Path | None, "--model-config", None,
                     "TOML or JSON file of model settings (ModelConfig): api_key_env, timeout_s, extra_body, "
                     "max_retries, price_input_per_mtok, price_output_per_mtok, n_ctx, n_threads, ..."),
        ShapedOption("model_opt", list[str], "--model-opt", [],
                     "Model setting KEY=VALUE (repeatable; overrides --model-config), e.g. --model-opt "
                     "api_key_env=VLLM_KEY."),
    ),
    "retrieve_only": (ShapedOption("retrieve_only", list[str], "--retrieve-only", [],
                                   "Retrieve only items created or credited with this provenance KEY=VALUE "
                                   "(repeatable; keys: run_id, model, target, device, operator, episode, "
                                   "protocol, team), e.g. --retrieve-only target=cpu."),),
}


def option_flag(name: str) -> str:
    """The option that sets the RunConfig field `name` (for messages)."""
    from sagekernel.runner.config import RunConfig

    extra = RunConfig.model_fields[name].json_schema_extra
    flag = extra.get("flag") if isinstance(extra, dict) else None
    return str(flag) if flag else "--" + name.replace("_", "-")


def _help(name: str, description: str, surface: str) -> str:
    """The field's help; a model-dependent default is spelled out from `defaults.for_model`."""
    from sagekernel.runner.config import MCP, model_dependent

    if not model_dependent(name):
        return description
    driver = "mcp" if surface == MCP else "builtin"
    api, local = defaults.for_model("api", driver)[name], defaults.for_model("local", driver)[name]
    return description + (f" [default: {api}]" if api == local else
                          f" [default: {api}; {local} for the embedded `local` model]")


def run_options(surface: str) -> list[inspect.Parameter]:
    """The typer parameters of the RunConfig knobs given on `surface` (runner/config.py SURFACES)."""
    from sagekernel.runner.config import RunConfig, knobs, model_dependent

    params = []
    for name in knobs(surface):
        if name in SHAPED:
            for shaped in SHAPED[name]:
                params.append(inspect.Parameter(
                    shaped.name, inspect.Parameter.KEYWORD_ONLY, annotation=shaped.annotation,
                    default=typer.Option(shaped.default, shaped.flag, help=shaped.help)))
            continue
        info = RunConfig.model_fields[name]
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        annotation: Any = info.annotation
        default = None if model_dependent(name) else info.get_default(call_default_factory=True)
        optional = type(None) in getattr(annotation, "__args__", ())
        if default is None and annotation is not None and not optional:
            annotation = annotation | None
        decls = [str(extra["flag"])] if extra.get("flag") else []
        params.append(inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
            default=typer.Option(default, *decls, help=_help(name, info.description or "", surface))))
    return params


F = TypeVar("F", bound=Callable[..., Any])


def with_run_options(surface: str) -> Callable[[F], F]:
    """Give a command `def cmd(<its own options>, **settings)` the knobs of `surface` as options:
    typer reads the signature, and the knob values arrive in `settings`."""

    def attach(func: F) -> F:
        own = [p for p in inspect.signature(func, eval_str=True).parameters.values()
               if p.kind is not inspect.Parameter.VAR_KEYWORD]
        params = [*own, *run_options(surface)]
        func.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        func.__annotations__ = {p.name: p.annotation for p in params}
        return func

    return attach


def parse_overrides(pairs: list[str], option: str, example: str) -> dict[str, Any]:
    """KEY=VALUE pairs as a dict; a VALUE that is JSON is decoded (20 -> 20, true -> True)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SageError(f"{option} expects KEY=VALUE (e.g. {example}), got {pair!r}")
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def with_baseline(overrides: dict[str, Any], baseline: str, target: str) -> dict[str, Any]:
    """`--baseline` as the harness setting it is (left out when eager, so an eager run's identity is
    unchanged), checked against the target before anything runs; a contradicting
    `--harness baseline=...` is refused."""
    from sagekernel.cli.options import OptionError, choice
    from sagekernel.harness.baseline import BASELINES, baseline_problem

    choice(baseline, BASELINES, "--baseline")
    problem = baseline_problem(baseline, target)
    if problem:
        raise OptionError("--baseline", problem)
    given = overrides.get("baseline")
    if given is not None and baseline != "eager" and given != baseline:
        raise OptionError("--baseline", f"{baseline!r} contradicts --harness baseline={given}")
    return overrides if baseline == "eager" else {**overrides, "baseline": baseline}


def run_config(settings: dict[str, Any], **fixed: Any) -> Any:
    """The RunConfig of a command's knob values (`fixed`: what the command itself sets, e.g. the
    driver); a bad value is one line naming its option."""
    from pydantic import ValidationError

    from sagekernel.cli.options import OptionError, from_validation, pinned_device, shared_memory
    from sagekernel.models.config import load_model_options, model_config_from
    from sagekernel.runner.config import RunConfig

    values = dict(settings)
    if "device" in values:
        values["device"] = pinned_device(values["device"])  # before anything starts a device runtime
    if "harness" in values:
        values["harness"] = with_baseline(parse_overrides(values["harness"], "--harness", "iters=20"),
                                          values.pop("baseline", "eager"), values.get("target", "cpu"))
    if "memory" in values:
        values["memory"] = shared_memory(values["memory"])  # --memory, else $SAGE_MEMORY_URL
    if "retrieve_only" in values:
        values["retrieve_only"] = {key: str(value) for key, value in parse_overrides(
            values["retrieve_only"], "--retrieve-only", "target=cpu").items()}
    if "model_opt" in values:
        try:
            values["model_options"] = {**load_model_options(values.pop("model_config", None)),
                                       **parse_overrides(values.pop("model_opt"), "--model-opt",
                                                         "timeout_s=300")}
            model_config_from(values["model_options"])
        except SageError as exc:
            raise OptionError("--model-opt/--model-config", str(exc)) from None
    try:
        return RunConfig(**values, **fixed)
    except ValidationError as exc:
        flags = {name: option_flag(name) for name in RunConfig.model_fields}
        raise from_validation(exc, flags) from None


def settings_table() -> str:
    """docs/settings.md: every RunConfig knob, where it is given, its default and help (kept equal
    to the code by tests/test_config_consistency.py; regenerate with
    `python3 -m sagekernel.cli.run_options > docs/settings.md`)."""
    from sagekernel.runner.config import (
        BLOCK,
        EXPERIMENT,
        MCP,
        RUN,
        TABLE,
        RunConfig,
        knob_surfaces,
        model_dependent,
    )
    from sagekernel.runner.environment import BY_TARGET, COMMON

    where = {RUN: "`sage run`", MCP: "`sage mcp`", TABLE: "experiment `[run]`", BLOCK: "experiment block",
             EXPERIMENT: "`sage experiment run`"}
    lines = [
        "# Run settings",
        "",
        "Generated from `RunConfig` (`src/sagekernel/runner/config.py`), where each setting is declared",
        "once; `tests/test_config_consistency.py` keeps this page, the options of `sage run` and `sage mcp`",
        "and the experiment keys equal to it. Regenerate with",
        "`PYTHONPATH=src python3 -m sagekernel.cli.run_options > docs/settings.md`.",
        "",
        "A default marked *model* depends on the model (`defaults.for_model`): it is resolved in",
        "`RunConfig`, so `sage run`, `sage mcp` and an experiment stream with the same model get the same",
        "value. Settings not given anywhere are set by the command itself (`driver`) or read from the",
        "environment (`environment`: the result-changing variables of `runner/environment.py`, part of",
        "the run's identity; a resume under other values is refused).",
        "",
        "| setting | option | default | given in | help |",
        "|---|---|---|---|---|",
    ]
    for name, info in RunConfig.model_fields.items():
        options = (", ".join(f"`{o.flag}`" for o in SHAPED[name]) if name in SHAPED
                   else f"`{option_flag(name)}`" if {RUN, MCP, EXPERIMENT} & set(knob_surfaces(name))
                   else "")
        if model_dependent(name):
            api, local = defaults.for_model("api")[name], defaults.for_model("local")[name]
            mcp_local = defaults.for_model("local", "mcp")[name]
            default = f"*model*: {api}; {local} for `local`" + (
                f" ({mcp_local} under `sage mcp`)" if mcp_local != local else "")
        else:
            value = info.get_default(call_default_factory=True)
            default = "" if value is None else f"`{value}`"
        given = ", ".join(where[s] for s in knob_surfaces(name))
        help_text = " ".join((info.description or "").split()).replace("|", "\\|")
        lines.append(f"| `{name}` | {options} | {default} | {given} | {help_text} |")
    lines += ["", "## Result-changing environment", "",
              "Read once when a run's configuration is built, stored in `environment` (part of the run's",
              "identity); resuming the run while one of them has another value (or is set or unset) is",
              "refused with a message naming it: restore the value, or start a new run with `--new`.",
              "Runs recorded before the environment was stored adopt the environment they resume under.",
              "", "| variable | targets | what it changes |", "|---|---|---|"]
    lines += [f"| `{var}` | all | {why} |" for var, why in COMMON.items()]
    lines += [f"| `{var}` | {target} | {why} |" for target, table in BY_TARGET.items()
              for var, why in table.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(settings_table(), end="")
