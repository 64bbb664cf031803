-- The tool-call log of `sage mcp`: one row per tool call a coding agent made (mcp_server/),
-- appended as the call ends, refused and failed calls included. The exchange log of the model
-- calls the server itself makes (distillation, rule abstraction) stays in `exchanges`.

CREATE TABLE tool_calls (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at     TEXT NOT NULL,             -- UTC ISO-8601, when the call ended
    run_id         TEXT,                      -- runs.run_id the server is driving
    client         TEXT NOT NULL,             -- "stdio" or the HTTP session id
    tool           TEXT NOT NULL,
    operator       TEXT,                      -- the operator open when the call was made
    round          INTEGER,                   -- the round it concerned (evaluate: the round spent)
    status         TEXT NOT NULL,             -- ok | refused | error
    arguments_json TEXT NOT NULL,
    result_json    TEXT NOT NULL,
    wall_s         REAL NOT NULL
);

CREATE INDEX tool_calls_by_run ON tool_calls(run_id, id);
