-- The failed spans of a run by name: a list filtered by a span name and a failure
-- across a project finds its traces in one range of this index, where the name
-- alone matched too many spans to list.
CREATE INDEX spans_run_failed_name ON spans (run_id, name, trace_id) WHERE status = 'error';
