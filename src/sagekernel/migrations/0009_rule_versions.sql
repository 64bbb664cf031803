-- Versions of a resident rule (issue 30, merge by replay; memory/rule_versions.py): when merged
-- memories hold different rule texts for one item, every text is kept, per memory that held it,
-- with that memory's utility changes of the item as its evidence (JSON list). items.rule_text is
-- the current version. Only items whose merged texts differ have rows.

CREATE TABLE rule_versions (
    item_id     INTEGER NOT NULL REFERENCES items(id),
    text_hash   TEXT NOT NULL,              -- sha256 of rule_text
    memory      TEXT NOT NULL,              -- the memory that held it: its memory_id, or file:NAME
    rule_text   TEXT NOT NULL,
    rule_tokens INTEGER NOT NULL,
    evidence    TEXT NOT NULL,              -- JSON: [{run_id, operator, episode, kind, at, team, xi, u_after}]
    PRIMARY KEY (item_id, text_hash, memory)
);

-- Names this memory in the versions it contributes to a merge (exported in the file's header).
INSERT INTO memory_meta (key, value) VALUES ('memory_id', lower(hex(randomblob(16))))
    ON CONFLICT(key) DO NOTHING;
