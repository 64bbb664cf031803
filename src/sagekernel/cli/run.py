"""`sage run`: argument handling only; the work is in sagekernel.runner.run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from sagekernel import defaults
from sagekernel.errors import SageError
from sagekernel.terminal import Console

_BUDGET_HELP = (
    f"T, rounds per operator shared by the correctness and optimisation episodes. Default: "
    f"{defaults.ROUNDS} (the paper's T) for API models; {defaults.LOCAL_ROUNDS} for the embedded `local` "
    "model, because a 1.5B model at ~5 tokens/s needs ~1.5-2 minutes per round, so the 3-operator demo "
    "suite finishes in ~25 minutes.")


#: `sage run`/`sage mcp` options whose name is not the RunConfig field's (for one-line errors).
RUN_OPTIONS = {"k": "-k", "max_tokens_per_call": "--max-tokens", "max_cost_usd": "--max-cost",
               "model_options": "--model-opt"}


def run_config(**values: Any) -> Any:
    """The RunConfig of these option values; a bad value is one line naming its option."""
    from pydantic import ValidationError

    from sagekernel.cli.options import OptionError, from_validation
    from sagekernel.models.config import model_config_from
    from sagekernel.runner.config import RunConfig

    try:
        model_config_from(values.get("model_options", {}))
    except SageError as exc:
        raise OptionError("--model-opt/--model-config", str(exc)) from None
    try:
        return RunConfig(**values)
    except ValidationError as exc:
        raise from_validation(exc, RUN_OPTIONS) from None


def _parse_overrides(pairs: list[str], option: str = "--harness",
                     example: str = "iters=20") -> dict[str, Any]:
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


def run_command(
    suite: str = typer.Option("demo", help="Suite: builtin, demo, level1, level2, level3, or a directory "
                                           "of task files. The demo suite is 3 small Level-1/2 operators."),
    target: str = typer.Option("cpu", help="Backend the kernels are written for: cpu, triton, cuda, "
                                           "ascendc."),
    device: str | None = typer.Option(None, help="The target's device (triton: interpreter, cuda, npu); "
                                                 "default: its first. `sage doctor` lists them."),
    model: str = typer.Option("local", help="Model spec: local (embedded Qwen2.5-Coder-1.5B), "
                                            "openai:<model>@<url>, anthropic:<model>, scripted:<file>, "
                                            "oracle[:key=value,...] (synthetic, docs/oracle.md)."),
    method: str = typer.Option("sage", help="Memory method: refinement, static-rag, value-memory, sage, "
                                            "sage-uniform-credit, sage-no-ugc, sage-random-ugc."),
    workspace: Path = typer.Option(Path("sage-workspace"), help="Workspace directory (memory, runs, log)."),
    schedule: str = typer.Option("given", help="Stream order: given | by-level | level:N | "
                                               "interleave:L2,L3."),
    limit: int | None = typer.Option(None, min=1, help="Process only the first N operators of the stream."),
    budget: int | None = typer.Option(None, min=1, help=_BUDGET_HELP),
    run_id: str | None = typer.Option(None, "--run-id", help="Run id (default: new, or the unfinished run "
                                                             "with the same configuration)."),
    resume: bool = typer.Option(False, help="Resume the latest unfinished run (with its stored settings)."),
    new: bool = typer.Option(False, help="Start a new run even if one with this configuration is "
                                         "unfinished."),
    memory_from: Path | None = typer.Option(None, help="Evaluate with a snapshot of another workspace's "
                                                       "memory (needs --frozen)."),
    frozen: bool = typer.Option(False, help="Memory is read-only: no distillation, no updates."),
    seed: int = typer.Option(0, help="Seed of randomised memory methods."),
    embedder: str = typer.Option("auto", help="Dense retrieval: auto (all-MiniLM-L6-v2 when installed) "
                                              "or none (BM25 only)."),
    gamma: float = typer.Option(defaults.GAMMA, help="Utility reranking strength γ."),
    hot_budget: int = typer.Option(defaults.HOT_BUDGET, help="Resident-rule token budget B."),
    k: int = typer.Option(defaults.K, "-k", help="Experiences retrieved per round."),
    max_reasks: int = typer.Option(defaults.MAX_REASKS, help="Trace-completeness re-asks per round."),
    max_tokens: int | None = typer.Option(None, help=f"Completion-token cap of one model call. Default: "
                                                     f"{defaults.MAX_TOKENS}; {defaults.LOCAL_MAX_TOKENS} "
                                                     "for the embedded `local` model."),
    temperature: float = typer.Option(defaults.TEMPERATURE, help="Sampling temperature."),
    distill: bool = typer.Option(True, help="Distil new memory items after each episode."),
    diagnostics: bool = typer.Option(True, help="After a crash or a wrong result, add the target's "
                                                "diagnostics (sanitizer, printf, first mismatch) to the "
                                                "next round's feedback."),
    max_total_tokens: int | None = typer.Option(None, help="Stop cleanly after this many tokens in all."),
    max_cost: float | None = typer.Option(None, help="Stop cleanly after this many USD (priced backends)."),
    harness: list[str] = typer.Option([], "--harness", help="Harness override KEY=VALUE (repeatable), "
                                                            "e.g. --harness iters=20."),
    model_config: Path | None = typer.Option(
        None, "--model-config", help="TOML or JSON file of model settings (ModelConfig): api_key_env, "
                                     "timeout_s, extra_body, max_retries, price_input_per_mtok, "
                                     "price_output_per_mtok, n_ctx, n_threads, ..."),
    model_opt: list[str] = typer.Option([], "--model-opt", help="Model setting KEY=VALUE (repeatable; "
                                                                "overrides --model-config), e.g. "
                                                                "--model-opt api_key_env=VLLM_KEY."),
    as_json: bool = typer.Option(False, "--json", help="Print the final summary as JSON on stdout."),
    progress: bool = typer.Option(True, help="Show the live progress display (on stderr)."),
) -> None:
    """Run the agent over a stream of operators, learning as it goes (resumable: rerun to continue)."""
    from sagekernel.agent.exceptions import RunInterrupted
    from sagekernel.models.config import load_model_options
    from sagekernel.runner.progress import QuietProgress, RichProgress
    from sagekernel.runner.run import RunSummary, run

    model_options = {**load_model_options(model_config), **_parse_overrides(model_opt, "--model-opt",
                                                                           "timeout_s=300")}
    is_local = model.strip().split(":")[0] == "local"
    if budget is None:
        budget = defaults.LOCAL_ROUNDS if is_local else defaults.ROUNDS
    if max_tokens is None:
        max_tokens = defaults.LOCAL_MAX_TOKENS if is_local else defaults.MAX_TOKENS
    cfg = run_config(workspace=workspace, suite=suite, target=target, device=device, model=model,
                    method=method,
                    schedule=schedule, limit=limit, budget=budget, run_id=run_id, resume=resume, new=new,
                    memory_from=memory_from, frozen=frozen, seed=seed, embedder=embedder, gamma=gamma,
                    hot_budget=hot_budget,
                    k=k, max_reasks=max_reasks, max_tokens_per_call=max_tokens, temperature=temperature,
                    distill=distill, diagnostics=diagnostics, max_total_tokens=max_total_tokens,
                    max_cost_usd=max_cost,
                    harness=_parse_overrides(harness), model_options=model_options, progress=progress)
    console = Console()
    try:
        summary = run(cfg, progress=RichProgress() if progress and not as_json else QuietProgress())
    except RunInterrupted as exc:
        if isinstance(exc.summary, RunSummary):
            _print(exc.summary, console, as_json)  # its message says how to resume
        else:
            Console(stderr=True).print(f"[yellow]{escape(str(exc))}[/]")
        raise typer.Exit(130) from None
    _print(summary, console, as_json)


def _print(summary: Any, console: Console, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary.to_dict(), indent=2, sort_keys=True))
        return
    table = Table(title=escape(f"run {summary.run_id} ({summary.status})"), show_header=True,
                  header_style="bold")
    for col in ("#", "operator", "level", "compiled", "correct", "rounds", "T_first ms", "T_best ms",
                "speedup"):
        table.add_column(col, justify="left" if col == "operator" else "right")
    for r in summary.results:
        table.add_row(str(r["position"] + 1), escape(str(r["operator"])), str(r["level"]),
                      "yes" if r["compiled"] else "no", "yes" if r["correct"] else "no",
                      str(r["rounds_used"]), _ms(r["t_first_ms"]), _ms(r["t_best_ms"]),
                      f"{r['speedup']:.2f}x" if r["speedup"] else "-")
    console.print(table)
    for r in summary.results:
        if r.get("error"):
            console.print(escape(f"operator {r['operator']} failed and was recorded as such: {r['error']}"))
    fast, s_self = _pct(summary.fast_1), f"{summary.s_self:.2f}x" if summary.s_self is not None else "-"
    console.print(escape(f"{summary.method} on {summary.suite}: {summary.done}/{summary.operators} "
                         "operators, "
                         f"CR {_pct(summary.cr)}, ER {_pct(summary.er)}, Fast_1.0 {fast}, S_self {s_self}, "
                         f"{summary.prompt_tokens + summary.completion_tokens} tokens "
                         f"(workspace {summary.workspace})"))
    if summary.message:
        console.print(escape(summary.message))


def _pct(value: float | None) -> str:
    return f"{value:.1f}%" if value is not None else "-"


def _ms(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else "-"


def register(app: typer.Typer) -> None:
    """Attach `sage run` to the root app."""
    app.command("run")(run_command)
