-- The short string attributes of spans (at most 256 bytes), one row per trace,
-- attribute code and value, however many of the trace's spans carry it: a
-- `span.attr.NAME = "text"` filter then starts from the traces listed here
-- instead of reading every span of the run. A row says a span of the trace was
-- written with that value; lists still test the spans themselves, so a value
-- overwritten later only lists a trace to test. Without a rowid, a lookup is one
-- descent of the value's tree.
CREATE TABLE span_texts (
    run_id   TEXT NOT NULL,
    code     INTEGER NOT NULL,
    value    TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    PRIMARY KEY (run_id, code, value, trace_id)
) WITHOUT ROWID;

INSERT OR IGNORE INTO span_texts (run_id, code, value, trace_id)
SELECT s.run_id, CAST(a.key AS INTEGER), a.value, s.trace_id
  FROM spans s, json_each(s.attributes) a
 WHERE a.type = 'text' AND length(CAST(a.value AS BLOB)) <= 256
   AND instr(a.value, char(0)) = 0;
