-- A row of a third kind (2) in `span_ranges` for each trace and name whose spans
-- hold a value `span_texts` does not list either: a string over 256 bytes or with
-- NUL, an array, an object. Between the two tables every value but null has a
-- row, so `span.attr.NAME exists` lists its traces from them. `json`, not
-- `jsonb`, as in migration 30: a string holding \u0000 stays readable.
INSERT INTO span_ranges (run_id, trace_id, code, kind, lo, hi)
SELECT DISTINCT s.run_id, s.trace_id, a.key::bigint, 2, 0, 0
  FROM spans s, json_each(s.attributes::json) a
 WHERE json_typeof(a.value) IN ('array', 'object')
    OR CASE WHEN json_typeof(a.value) = 'string'
            THEN strpos(a.value::text, '\u0000') > 0 OR octet_length(a.value #>> '{}') > 256
            ELSE false END
ON CONFLICT (run_id, trace_id, code, kind) DO NOTHING;
