-- Provenance of the memory (issue 30): one immutable row per event of an item's life: its creation
-- (seeded, distilled, imported) and every utility change (credited: ATU/uniform credit; counted: value
-- memory's counters), with the run, model, target, device, operator, episode and harness protocol that
-- caused it. `sage memory show ID` prints an item's rows; `sage memory list` filters by them; merge by
-- replay folds the credited rows (memory/merge.py). Rows are never updated or deleted (triggers).

CREATE TABLE item_history (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    item_id     INTEGER NOT NULL REFERENCES items(id),
    kind        TEXT NOT NULL CHECK (kind IN ('seeded', 'distilled', 'imported', 'credited', 'counted')),
    clock       INTEGER NOT NULL,           -- the memory's episode clock after the episode (0: none)
    run_id      TEXT NOT NULL DEFAULT '',
    model       TEXT NOT NULL DEFAULT '',
    target      TEXT NOT NULL DEFAULT '',
    device      TEXT NOT NULL DEFAULT '',
    operator    TEXT NOT NULL DEFAULT '',
    episode     TEXT NOT NULL DEFAULT '',   -- corr | opt | '' (not an episode)
    protocol    TEXT NOT NULL DEFAULT '',   -- the harness protocol (hash of the harness settings)
    team        TEXT NOT NULL DEFAULT '',   -- who ran it (SAGE_TEAM / --team; '' unknown)
    xi          REAL,                       -- the credit of this change (credited rows)
    u_before    REAL,
    u_after     REAL,
    retrieved   INTEGER NOT NULL DEFAULT 0, -- 1: counted in n_ret by this change
    adopted     INTEGER NOT NULL DEFAULT 0, -- 1: counted in n_ado by this change
    created_at  TEXT NOT NULL
);
CREATE INDEX item_history_item ON item_history(item_id, id);
CREATE INDEX item_history_run ON item_history(run_id);

CREATE TRIGGER item_history_no_update BEFORE UPDATE ON item_history BEGIN
    SELECT RAISE(ABORT, 'item_history is immutable');
END;
CREATE TRIGGER item_history_no_delete BEFORE DELETE ON item_history BEGIN
    SELECT RAISE(ABORT, 'item_history is immutable');
END;
