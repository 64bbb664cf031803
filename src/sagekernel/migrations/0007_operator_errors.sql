-- Why an operator ended without a normal result (runner/run.py): an unexpected failure while it was
-- processed (a harness or task error, a bug) is recorded as that operator's result, with its reason,
-- and the stream goes on; a resume skips it like any finished operator. NULL: it finished normally.

ALTER TABLE operator_results ADD COLUMN error TEXT;
