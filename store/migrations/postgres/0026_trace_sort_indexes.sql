-- A run's traces in the order of each column the trace list sorts by: its first
-- page is the index's first rows, where a sort read every trace of the run (33-70
-- ms at 100,000 traces on SQLite). Each expression is the list's own
-- (store/src/trace_list.rs, `by_column`), as an index on an expression serves only
-- that expression.
CREATE INDEX traces_run_spans ON traces (run_id, span_count, trace_id);
CREATE INDEX traces_run_errors ON traces (run_id, (COALESCE(error_count, 0)), trace_id);
CREATE INDEX traces_run_iterations ON traces (run_id, iteration_count, trace_id);
CREATE INDEX traces_run_tokens ON traces (run_id, (COALESCE(root_tokens, child_tokens)), trace_id);
CREATE INDEX traces_run_duration ON traces (run_id, (COALESCE(end_us - start_us, -1)), trace_id);
