-- trace_numbers without a rowid: the table is then its primary key (run, trace,
-- key), which holds the value, so neither the rowid's index of that key nor its
-- copy for lookups by trace (trace_numbers_trace) is needed. That is two fewer
-- entries written for each number of a root span, and about 50 bytes a span on
-- `bench bytes`. The other indexes are made again in the order they were first
-- made, as SQLite's planner breaks ties between indexes by that order.
-- The trigger that keeps a trace's step on its numbers is dropped and made again
-- as it was (0019): the rename below checks every trigger, and this one names the
-- table while it is gone.
DROP TRIGGER traces_step_values;

CREATE TABLE trace_numbers_new (
    run_id   TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    key      TEXT NOT NULL,
    project  TEXT NOT NULL,
    value    REAL NOT NULL,
    step     INTEGER,
    PRIMARY KEY (run_id, trace_id, key)
) WITHOUT ROWID;
INSERT INTO trace_numbers_new (run_id, trace_id, key, project, value, step)
SELECT run_id, trace_id, key, project, value, step FROM trace_numbers;
DROP TABLE trace_numbers;
ALTER TABLE trace_numbers_new RENAME TO trace_numbers;

CREATE INDEX trace_numbers_run ON trace_numbers (run_id, key, value, trace_id);
CREATE INDEX trace_numbers_project ON trace_numbers (project, key, value, run_id, trace_id);
CREATE INDEX trace_numbers_key ON trace_numbers (key, value, run_id, trace_id);
CREATE INDEX trace_numbers_step ON trace_numbers (run_id, key, step, trace_id, value);

CREATE TRIGGER traces_step_values AFTER UPDATE OF step ON traces
WHEN old.step IS NOT new.step
BEGIN
    UPDATE trace_numbers SET step = new.step
     WHERE run_id = new.run_id AND trace_id = new.trace_id;
    UPDATE trace_texts SET step = new.step
     WHERE run_id = new.run_id AND trace_id = new.trace_id;
END;
