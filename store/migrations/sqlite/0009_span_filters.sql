-- Span filters and what-changed read a run's spans and numbers by what they test,
-- not trace by trace: a name or a failure found through an index, then its traces
-- (a filter that matched nothing read every span of a 100,000-trace run).
CREATE INDEX spans_run_name ON spans (run_id, name, trace_id);
CREATE INDEX spans_run_failed ON spans (run_id, trace_id) WHERE status = 'error';
-- A trace's numbers by trace: without statistics SQLite read them through
-- trace_numbers_run, all of the run's numbers for each trace.
CREATE INDEX trace_numbers_trace ON trace_numbers (run_id, trace_id, key, value);
-- The type of an error body; a body that is not JSON (none is written so) has none.
CREATE INDEX spans_run_error_type
    ON spans (run_id, (CASE WHEN json_valid(error) THEN json_extract(error, '$.type') END), trace_id)
    WHERE error IS NOT NULL;
