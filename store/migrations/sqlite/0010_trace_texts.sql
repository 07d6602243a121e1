-- The short string root attributes of each trace (at most 256 bytes), one row per
-- (trace, key), as trace_numbers holds the numbers: a distribution's split label or
-- a group's key is then a lookup instead of a read of each trace's attributes.
-- Kept by the trace upsert: a key whose latest value is not such a string has no
-- row. Without a rowid, a lookup is one descent of the key's tree.
CREATE TABLE trace_texts (
    run_id   TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    key      TEXT NOT NULL,
    value    TEXT NOT NULL,
    PRIMARY KEY (run_id, trace_id, key)
) WITHOUT ROWID;

INSERT INTO trace_texts (run_id, trace_id, key, value)
SELECT t.run_id, t.trace_id, a.key, a.value
  FROM traces t, json_each(t.attributes) a
 WHERE a.type = 'text' AND length(CAST(a.value AS BLOB)) <= 256
   AND instr(a.value, char(0)) = 0;
