"""The LLM boundary: the only package that imports an LLM SDK or runtime.

    from sagekernel.models import make_model, ModelConfig, Budget, ExchangeLog, probe
    model = make_model("openai:qwen2.5-coder@http://localhost:8000/v1", log=ExchangeLog(conn, run_id=rid))
    probe(model)
    reply = model.complete([Message("user", "...")], max_tokens=512)

Files: base.py (Message, Reply, Model), registry.py (spec strings, make_model, probe), config.py
(ModelConfig, Budget), backend.py (shared retry/log/budget loop), retry.py (what is retried),
exchange_log.py (the SQLite log), openai_http.py, anthropic_api.py, local.py + weights.py (the
embedded llama.cpp model), scripted.py (tests).
"""

from sagekernel.models.base import Message, Model, OutputSchema, Reply
from sagekernel.models.config import Budget, ModelConfig
from sagekernel.models.exchange_log import ExchangeLog, exchange_context
from sagekernel.models.registry import ModelSpecError, make_model, parse_spec, probe

__all__ = ["Budget", "ExchangeLog", "Message", "Model", "ModelConfig", "ModelSpecError", "OutputSchema",
           "Reply",
           "exchange_context", "make_model", "parse_spec", "probe"]
