-- Versions of a resident rule: the SQLite migration 0009_rule_versions.sql in PostgreSQL's
-- dialect (see there).

CREATE TABLE rule_versions (
    item_id     BIGINT NOT NULL REFERENCES items(id),
    text_hash   TEXT NOT NULL,
    memory      TEXT NOT NULL,
    rule_text   TEXT NOT NULL,
    rule_tokens INTEGER NOT NULL,
    evidence    TEXT NOT NULL,
    PRIMARY KEY (item_id, text_hash, memory)
);

INSERT INTO memory_meta (key, value) VALUES ('memory_id', md5(random()::text || clock_timestamp()::text))
    ON CONFLICT (key) DO NOTHING;
