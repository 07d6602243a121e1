-- The short string root attributes of each trace (at most 256 bytes), one row per
-- (trace, key), as trace_numbers holds the numbers: a distribution's split label or
-- a group's key is then a join instead of a read of each trace's attributes. Kept
-- by the trace upsert: a key whose latest value is not such a string has no row.
-- Compared byte by byte, as the filter grammar compares strings.
CREATE TABLE trace_texts (
    run_id   TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    key      TEXT NOT NULL,
    value    TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (run_id, trace_id, key)
);

-- `json`, not `jsonb`: a string holding \u0000 (which no text column can hold)
-- stays JSON text here and is left out, where a cast to `jsonb` would fail the
-- whole migration. CASE: its test comes before the member is read as text.
INSERT INTO trace_texts (run_id, trace_id, key, value)
SELECT t.run_id, t.trace_id, a.key, a.value #>> '{}'
  FROM traces t, json_each(t.attributes::json) a
 WHERE CASE WHEN json_typeof(a.value) = 'string' AND strpos(a.value::text, '\u0000') = 0
            THEN octet_length(a.value #>> '{}') <= 256
            ELSE false END;
