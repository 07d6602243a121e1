-- The traces in which a later batch changed the attributes of a span stored
-- before, so that `span_texts` may list a value none of its spans holds now. A
-- list tests the spans only of the traces named here; every other trace's rows
-- are exact. Kept until the run goes: a row it vouches for may outlive its spans.
CREATE TABLE span_text_overwrites (
    run_id   TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    PRIMARY KEY (run_id, trace_id)
);

-- Rows written before this table may be stale: listed again from the spans as
-- they are now, which makes every trace's rows exact (as in migration 29).
TRUNCATE span_texts;
INSERT INTO span_texts (run_id, code, value, trace_id)
SELECT DISTINCT s.run_id, a.key::bigint, a.value #>> '{}', s.trace_id
  FROM spans s, json_each(s.attributes::json) a
 WHERE CASE WHEN json_typeof(a.value) = 'string' AND strpos(a.value::text, '\u0000') = 0
            THEN octet_length(a.value #>> '{}') <= 256
            ELSE false END;
