-- The numeric root attributes of each trace, one row per (trace, key), so that a
-- sort or a range filter on one (reward, score…) walks an index instead of reading
-- every trace's attributes. Kept by the trace upsert: a key whose latest value is
-- not a number has no row.
CREATE TABLE trace_numbers (
    run_id   TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    key      TEXT NOT NULL,
    project  TEXT NOT NULL,
    value    REAL NOT NULL,
    PRIMARY KEY (run_id, trace_id, key)
);
CREATE INDEX trace_numbers_run ON trace_numbers (run_id, key, value, trace_id);
CREATE INDEX trace_numbers_project ON trace_numbers (project, key, value, run_id, trace_id);
CREATE INDEX trace_numbers_key ON trace_numbers (key, value, run_id, trace_id);

INSERT INTO trace_numbers (run_id, trace_id, key, project, value)
SELECT t.run_id, t.trace_id, a.key, t.project, CAST(a.value AS REAL)
  FROM traces t, json_each(t.attributes) a
 WHERE a.type IN ('integer', 'real');
