-- The short string attributes of spans (at most 256 bytes), one row per trace,
-- attribute code and value, however many of the trace's spans carry it: a
-- `span.attr.NAME = "text"` filter then starts from the traces listed here
-- instead of reading every span of the run. A row says a span of the trace was
-- written with that value; lists still test the spans themselves, so a value
-- overwritten later only lists a trace to test. Compared byte by byte, as the
-- filter grammar compares strings.
CREATE TABLE span_texts (
    run_id   TEXT NOT NULL,
    code     BIGINT NOT NULL,
    value    TEXT COLLATE "C" NOT NULL,
    trace_id TEXT NOT NULL,
    PRIMARY KEY (run_id, code, value, trace_id)
);

-- `json`, not `jsonb`: a string holding \u0000 (which no text column can hold)
-- stays JSON text here and is left out. CASE: its test comes before the member is
-- read as text.
INSERT INTO span_texts (run_id, code, value, trace_id)
SELECT DISTINCT s.run_id, a.key::bigint, a.value #>> '{}', s.trace_id
  FROM spans s, json_each(s.attributes::json) a
 WHERE CASE WHEN json_typeof(a.value) = 'string' AND strpos(a.value::text, '\u0000') = 0
            THEN octet_length(a.value #>> '{}') <= 256
            ELSE false END;
