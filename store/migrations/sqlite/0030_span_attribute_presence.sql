-- A row of a third kind (2) in `span_ranges` for each trace and name whose spans
-- hold a value `span_texts` does not list either: a string over 256 bytes or with
-- NUL, an array, an object. Between the two tables every value but null has a
-- row, so `span.attr.NAME exists` lists its traces from them.
INSERT OR IGNORE INTO span_ranges (run_id, trace_id, code, kind, lo, hi)
SELECT DISTINCT s.run_id, s.trace_id, CAST(a.key AS INTEGER), 2, 0, 0
  FROM spans s, json_each(s.attributes) a
 WHERE a.type IN ('array', 'object')
    OR (a.type = 'text' AND (length(CAST(a.value AS BLOB)) > 256
                             OR instr(a.value, char(0)) > 0));
