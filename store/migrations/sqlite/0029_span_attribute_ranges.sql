-- Each trace's span numbers and booleans, a row per attribute code and kind (0 a
-- number, 1 a boolean as 0 or 1): the least and greatest value its spans were
-- written with. A trace holds a span over a bound exactly when `hi` is over it
-- (under: `lo`), so a `span.attr.NAME > 5` or `= true` filter lists its traces
-- from an index instead of reading every span of the run.
CREATE TABLE span_ranges (
    run_id   TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    code     INTEGER NOT NULL,
    kind     INTEGER NOT NULL,
    lo       REAL NOT NULL,
    hi       REAL NOT NULL,
    PRIMARY KEY (run_id, trace_id, code, kind)
) WITHOUT ROWID;
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
) WITHOUT ROWID;

INSERT INTO span_ranges (run_id, trace_id, code, kind, lo, hi)
SELECT s.run_id, s.trace_id, CAST(a.key AS INTEGER), a.type IN ('true', 'false'),
       MIN(CAST(a.value AS REAL)), MAX(CAST(a.value AS REAL))
  FROM spans s, json_each(s.attributes) a
 WHERE a.type IN ('integer', 'real', 'true', 'false')
 GROUP BY 1, 2, 3, 4;

-- Rows written before the table above may be stale: listed again from the spans
-- as they are now, which makes every trace's rows exact.
DELETE FROM span_texts;
INSERT OR IGNORE INTO span_texts (run_id, code, value, trace_id)
SELECT s.run_id, CAST(a.key AS INTEGER), a.value, s.trace_id
  FROM spans s, json_each(s.attributes) a
 WHERE a.type = 'text' AND length(CAST(a.value AS BLOB)) <= 256
   AND instr(a.value, char(0)) = 0;
