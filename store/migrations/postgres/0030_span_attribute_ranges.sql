-- Each trace's span numbers and booleans, a row per attribute code and kind (0 a
-- number, 1 a boolean as 0 or 1): the least and greatest value its spans were
-- written with. A trace holds a span over a bound exactly when `hi` is over it
-- (under: `lo`), so a `span.attr.NAME > 5` or `= true` filter lists its traces
-- from an index instead of reading every span of the run.
CREATE TABLE span_ranges (
    run_id   TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    code     BIGINT NOT NULL,
    kind     BIGINT NOT NULL,
    lo       DOUBLE PRECISION NOT NULL,
    hi       DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, trace_id, code, kind)
);
-- Ending in the trace: a list reads only the index.
CREATE INDEX span_ranges_hi ON span_ranges (run_id, code, kind, hi, trace_id);
CREATE INDEX span_ranges_lo ON span_ranges (run_id, code, kind, lo, trace_id);

-- The traces in which a later batch set again a name of a span stored before, so
-- that `span_texts` may list a value none of its spans holds now, and
-- `span_ranges` a bound none reaches. A list tests the spans only of the traces
-- named here; every other trace's rows are exact. Kept until the run goes: a row
-- it vouches for may outlive its spans.
CREATE TABLE span_attribute_overwrites (
    run_id   TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    PRIMARY KEY (run_id, trace_id)
);

-- `json`, not `jsonb`, as in migration 29: a string holding \u0000 stays readable.
INSERT INTO span_ranges (run_id, trace_id, code, kind, lo, hi)
SELECT s.run_id, s.trace_id, a.key::bigint, v.kind, MIN(v.num), MAX(v.num)
  FROM spans s, json_each(s.attributes::json) a,
       LATERAL (SELECT CASE json_typeof(a.value) WHEN 'boolean' THEN 1 ELSE 0 END AS kind,
                       CASE json_typeof(a.value)
                            WHEN 'number' THEN (a.value #>> '{}')::float8
                            WHEN 'boolean' THEN CASE WHEN (a.value #>> '{}') = 'true'
                                                     THEN 1 ELSE 0 END
                       END AS num) v
 WHERE json_typeof(a.value) IN ('number', 'boolean')
 GROUP BY 1, 2, 3, 4;

-- Rows written before the table above may be stale: listed again from the spans
-- as they are now, which makes every trace's rows exact (as in migration 29).
TRUNCATE span_texts;
INSERT INTO span_texts (run_id, code, value, trace_id)
SELECT DISTINCT s.run_id, a.key::bigint, a.value #>> '{}', s.trace_id
  FROM spans s, json_each(s.attributes::json) a
 WHERE CASE WHEN json_typeof(a.value) = 'string' AND strpos(a.value::text, '\u0000') = 0
            THEN octet_length(a.value #>> '{}') <= 256
            ELSE false END;
