-- Runs, their planned stream, per-operator results and per-round traces.
-- Written by runner/ only; read by report/ (read-only connection).

CREATE TABLE runs (
    run_id       TEXT PRIMARY KEY,          -- e.g. 20261130_031500_sage
    created_at   TEXT NOT NULL,
    finished_at  TEXT,
    status       TEXT NOT NULL,             -- running | finished | interrupted | failed
    method       TEXT NOT NULL,             -- refinement | static-rag | value-memory | sage | sage-uniform-credit | sage-no-ugc | sage-random-ugc
    model        TEXT NOT NULL,             -- model spec string
    target       TEXT NOT NULL,             -- cpu | ...
    suite        TEXT NOT NULL,
    schedule     TEXT NOT NULL,
    budget       INTEGER NOT NULL,          -- T, rounds per operator
    frozen       INTEGER NOT NULL DEFAULT 0, -- 1: memory read-only (transfer / fixed bank)
    config_json  TEXT NOT NULL DEFAULT '{}'  -- every other knob, for reproducibility
);

-- The stream as planned at run start (so a resumed run processes the same order).
CREATE TABLE run_stream (
    run_id    TEXT NOT NULL REFERENCES runs(run_id),
    position  INTEGER NOT NULL,
    operator  TEXT NOT NULL,
    level     INTEGER NOT NULL,
    category  TEXT NOT NULL,
    PRIMARY KEY (run_id, position)
);

-- One row per finished operator, recorded BEFORE the memory update of its last episode.
CREATE TABLE operator_results (
    run_id               TEXT NOT NULL REFERENCES runs(run_id),
    position             INTEGER NOT NULL,
    operator             TEXT NOT NULL,
    level                INTEGER NOT NULL,
    category             TEXT NOT NULL,
    compiled             INTEGER NOT NULL,
    correct              INTEGER NOT NULL,
    rounds_used          INTEGER NOT NULL,
    first_correct_round  INTEGER,
    t_first_ms           REAL,
    t_best_ms            REAL,
    t_ref_ms             REAL,
    prompt_tokens        INTEGER NOT NULL DEFAULT 0,
    completion_tokens    INTEGER NOT NULL DEFAULT 0,
    cost_usd             REAL,
    wall_s               REAL NOT NULL DEFAULT 0,
    recorded_at          TEXT NOT NULL,
    PRIMARY KEY (run_id, position)
);

-- One row per evaluated round (records.RoundTrace as JSON, plus the columns reports filter on).
CREATE TABLE round_traces (
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    operator    TEXT NOT NULL,
    round       INTEGER NOT NULL,
    episode     TEXT NOT NULL,              -- corr | opt
    compiled    INTEGER NOT NULL,
    correct     INTEGER NOT NULL,
    latency_ms  REAL,
    trace_json  TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (run_id, operator, round)
);

-- Kernel sources by content hash (a candidate is stored once however often it recurs).
CREATE TABLE candidates (
    hash    TEXT PRIMARY KEY,
    source  TEXT NOT NULL
);

-- Marks an episode's memory update as applied; written in the same transaction as the update,
-- so a resumed run never applies it twice.
CREATE TABLE episode_updates (
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    operator    TEXT NOT NULL,
    episode     TEXT NOT NULL,
    applied_at  TEXT NOT NULL,
    PRIMARY KEY (run_id, operator, episode)
);
