-- Span filters and what-changed read a run's spans and numbers by what they test,
-- not trace by trace. Names compare byte by byte, as the filters compare them.
CREATE INDEX spans_run_name ON spans (run_id, name COLLATE "C", trace_id);
CREATE INDEX spans_run_failed ON spans (run_id, trace_id) WHERE status = 'error';
CREATE INDEX trace_numbers_trace ON trace_numbers (run_id, trace_id, key, value);
CREATE INDEX spans_run_error_type ON spans (run_id, (error::jsonb ->> 'type') COLLATE "C", trace_id)
    WHERE error IS NOT NULL AND jsonb_typeof(error::jsonb -> 'type') = 'string';
