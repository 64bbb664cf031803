-- Prompt tokens a call read from a prefix cache instead of computing them (models/exchange_log.py):
-- the embedded model's reused KV-cache prefix, or an endpoint's usage.prompt_tokens_details.cached_tokens
-- (vLLM, SGLang, OpenAI). NULL: the backend did not say. (0005 is taken by the MCP tool-call log.)

ALTER TABLE exchanges ADD COLUMN cached_tokens INTEGER;
