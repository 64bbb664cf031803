-- The model exchange log: one row per attempt of one model call, appended as it happens
-- (models/exchange_log.py). Failed attempts that were retried are rows too (status 'retry').
-- Written by models/ only; read by `sage log` and report/ (read-only).

CREATE TABLE exchanges (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at         TEXT NOT NULL,             -- UTC ISO-8601, when the attempt ended
    call_id            TEXT NOT NULL,             -- groups the attempts of one complete() call
    attempt            INTEGER NOT NULL,          -- 1-based
    status             TEXT NOT NULL,             -- ok | retry | error
    run_id             TEXT,                      -- runs.run_id when the call belongs to a run
    operator           TEXT,                      -- task operator the call was made for
    round              INTEGER,                   -- agent round
    tags_json          TEXT NOT NULL DEFAULT '{}',-- any other tags (episode, worker, ...)
    model_spec         TEXT NOT NULL,             -- the spec string of the Model (e.g. openai:m@url)
    model              TEXT,                      -- model id the backend reported
    messages_json      TEXT NOT NULL,             -- [{"role":..,"content":..}, ...]
    params_json        TEXT NOT NULL,             -- max_tokens, temperature, stop, seed, extra_body
    prompt_text        TEXT NOT NULL,             -- messages flattened, for full-text search
    reply_text         TEXT,
    finish_reason      TEXT,
    prompt_tokens      INTEGER,
    completion_tokens  INTEGER,
    cost_usd           REAL,
    latency_s          REAL,
    error              TEXT,                      -- error message for status retry | error
    extra_json         TEXT NOT NULL DEFAULT '{}' -- backend details (tokens/s, usage_estimated, ...)
);

CREATE INDEX exchanges_by_run ON exchanges(run_id, id);
CREATE INDEX exchanges_by_call ON exchanges(call_id);

-- Full-text search over prompts and replies (external content: the text is stored once, above).
CREATE VIRTUAL TABLE exchanges_fts USING fts5(
    prompt_text, reply_text, content='exchanges', content_rowid='id'
);

CREATE TRIGGER exchanges_ai AFTER INSERT ON exchanges BEGIN
    INSERT INTO exchanges_fts(rowid, prompt_text, reply_text)
    VALUES (new.id, new.prompt_text, coalesce(new.reply_text, ''));
END;

CREATE TRIGGER exchanges_ad AFTER DELETE ON exchanges BEGIN
    INSERT INTO exchanges_fts(exchanges_fts, rowid, prompt_text, reply_text)
    VALUES ('delete', old.id, old.prompt_text, coalesce(old.reply_text, ''));
END;

CREATE TRIGGER exchanges_au AFTER UPDATE ON exchanges BEGIN
    INSERT INTO exchanges_fts(exchanges_fts, rowid, prompt_text, reply_text)
    VALUES ('delete', old.id, old.prompt_text, coalesce(old.reply_text, ''));
    INSERT INTO exchanges_fts(rowid, prompt_text, reply_text)
    VALUES (new.id, new.prompt_text, coalesce(new.reply_text, ''));
END;
