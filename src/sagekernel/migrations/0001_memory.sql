-- The learning memory (spec §1.1, §1.2): experience items, their adopters, adoption records,
-- hot snapshots and cached embeddings (BM25 is computed in memory, memory/lexical.py). Written by
-- memory/ only (through MemoryPolicy.learn, load_seed and import); read by report/.

CREATE TABLE items (
    id                  INTEGER PRIMARY KEY,
    title               TEXT NOT NULL,
    type                TEXT NOT NULL,
    category            TEXT NOT NULL DEFAULT '',
    error_message       TEXT NOT NULL DEFAULT '',
    wrong_code          TEXT NOT NULL DEFAULT '',
    correct_code        TEXT NOT NULL DEFAULT '',
    u                   REAL NOT NULL DEFAULT 0,      -- ATU utility, in [-q, 1]
    n_ret               INTEGER NOT NULL DEFAULT 0,   -- deduplicated (per episode) retrievals
    n_ado               INTEGER NOT NULL DEFAULT 0,   -- deduplicated (per episode) adoptions
    n_upd               INTEGER NOT NULL DEFAULT 0,   -- ATU updates received (drives eta)
    p_hat               REAL NOT NULL DEFAULT 0,      -- access-frequency estimate (spec §6.1)
    eligible_episodes   INTEGER NOT NULL DEFAULT 0,   -- retrievable episodes since creation
    state               TEXT NOT NULL DEFAULT 'cold' CHECK (state IN ('cold', 'validated', 'consolidated')),
    rule_text           TEXT NOT NULL DEFAULT '',     -- abstracted resident rule (spec §6.4)
    rule_tokens         INTEGER NOT NULL DEFAULT 0,   -- L_m
    q1                  REAL NOT NULL DEFAULT 0,      -- value memory Q, Drafting stage (spec §12.6)
    q2                  REAL NOT NULL DEFAULT 0,      -- value memory Q, Refining stage
    born_episode        INTEGER NOT NULL DEFAULT 0,   -- episode clock when the item was written
    resident_episodes   INTEGER NOT NULL DEFAULT 0,   -- episodes spent consolidated
    promoted_at_episode INTEGER,
    created_at          TEXT NOT NULL,
    source              TEXT NOT NULL DEFAULT 'distilled',  -- seed | distilled | import
    content_hash        TEXT NOT NULL
);
CREATE INDEX items_state ON items(state);
CREATE INDEX items_hash ON items(content_hash);
CREATE INDEX items_retrieved ON items(id) WHERE n_ret > 0;

-- O_m: distinct operators that adopted the item (spec §1.1).
CREATE TABLE item_adopters (
    item_id   INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
    operator  TEXT NOT NULL,
    PRIMARY KEY (item_id, operator)
);

-- Distinct operators that retrieved the item: the Uniform Credit gate proxy (spec §9).
CREATE TABLE item_retrievers (
    item_id   INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
    operator  TEXT NOT NULL,
    PRIMARY KEY (item_id, operator)
);

-- Every adoption decision a_{m,t} with its rationale (spec §2 step 3); adopted NULL = unresolved.
CREATE TABLE adoptions (
    run_id      TEXT NOT NULL,
    operator    TEXT NOT NULL,
    episode     TEXT NOT NULL,
    round       INTEGER NOT NULL,
    item_id     INTEGER NOT NULL,
    adopted     INTEGER,
    rationale   TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL
);
CREATE INDEX adoptions_item ON adoptions(item_id);
CREATE INDEX adoptions_run ON adoptions(run_id, operator);

-- One row per UGC rebuild (spec §1.2).
CREATE TABLE hot_snapshots (
    id            INTEGER PRIMARY KEY,
    run_id        TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    budget        INTEGER NOT NULL,
    n_ops         INTEGER NOT NULL,
    total_tokens  INTEGER NOT NULL,
    entries_json  TEXT NOT NULL
);
CREATE INDEX hot_snapshots_run ON hot_snapshots(run_id);

-- One row per learned episode (the episode clock; n_ops of a snapshot counts its operators).
CREATE TABLE memory_episodes (
    clock       INTEGER PRIMARY KEY,
    run_id      TEXT NOT NULL,
    operator    TEXT NOT NULL,
    episode     TEXT NOT NULL,
    z           REAL,
    created_at  TEXT NOT NULL
);

-- Small key/value state: PopArt statistics of value memory, etc.
CREATE TABLE memory_meta (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);

-- Cached dense embeddings (float32 little-endian blobs), one per item and model.
CREATE TABLE item_embeddings (
    item_id  INTEGER PRIMARY KEY REFERENCES items(id) ON DELETE CASCADE,
    model    TEXT NOT NULL,
    dim      INTEGER NOT NULL,
    vec      BLOB NOT NULL
);
