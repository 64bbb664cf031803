-- Provenance of the memory: the SQLite migration 0008_memory_provenance.sql in PostgreSQL's dialect
-- (see there). Immutable: a trigger refuses every UPDATE and DELETE.

CREATE TABLE item_history (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    item_id     BIGINT NOT NULL REFERENCES items(id),
    kind        TEXT NOT NULL CHECK (kind IN ('seeded', 'distilled', 'imported', 'credited', 'counted')),
    clock       BIGINT NOT NULL,
    run_id      TEXT NOT NULL DEFAULT '',
    model       TEXT NOT NULL DEFAULT '',
    target      TEXT NOT NULL DEFAULT '',
    device      TEXT NOT NULL DEFAULT '',
    operator    TEXT NOT NULL DEFAULT '',
    episode     TEXT NOT NULL DEFAULT '',
    protocol    TEXT NOT NULL DEFAULT '',
    team        TEXT NOT NULL DEFAULT '',
    xi          DOUBLE PRECISION,
    u_before    DOUBLE PRECISION,
    u_after     DOUBLE PRECISION,
    retrieved   INTEGER NOT NULL DEFAULT 0,
    adopted     INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL
);
CREATE INDEX item_history_item ON item_history(item_id, id);
CREATE INDEX item_history_run ON item_history(run_id);

CREATE FUNCTION item_history_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'item_history is immutable';
END $$;
CREATE TRIGGER item_history_no_change BEFORE UPDATE OR DELETE ON item_history
    FOR EACH ROW EXECUTE FUNCTION item_history_immutable();
