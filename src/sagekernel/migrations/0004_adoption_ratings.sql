-- A person's rating of an adopted record (sage audit adoptions, S1 App. D.1): does the code revision
-- that followed the decision correspond to the adopted item? Written by `sage audit` only.

CREATE TABLE adoption_ratings (
    run_id     TEXT NOT NULL REFERENCES runs(run_id),
    operator   TEXT NOT NULL,
    round      INTEGER NOT NULL,
    item_id    INTEGER NOT NULL,
    rating     TEXT NOT NULL CHECK (rating IN ('full', 'partial', 'unrelated')),
    rater      TEXT NOT NULL DEFAULT '',
    auto_match INTEGER,                 -- the automatic lower-bound check when it was rated (1/0)
    rated_at   TEXT NOT NULL,
    PRIMARY KEY (run_id, operator, round, item_id, rater)
);
