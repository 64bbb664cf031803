"""Built-in experiments named after the paper's: TOML files shipped in experiment/presets/."""

from __future__ import annotations

from importlib import resources

from sagekernel.experiment.spec import ExperimentSpec, ExperimentSpecError, Overrides, parse


def names() -> list[str]:
    folder = resources.files("sagekernel.experiment").joinpath("presets")
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


def text(name: str) -> str:
    if name not in names():
        raise ExperimentSpecError(
            f"no experiment file or preset named {name!r}; presets: {', '.join(names())}"
        )
    return (
        resources.files("sagekernel.experiment")
        .joinpath("presets", f"{name}.toml")
        .read_text(encoding="utf-8")
    )


def load(name: str, overrides: Overrides | None = None) -> ExperimentSpec:
    return parse(text(name), origin=f"preset {name}", overrides=overrides)


def description(name: str) -> str:
    return load(name).description
