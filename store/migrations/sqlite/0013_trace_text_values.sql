-- A run's short string root attributes by key and value: an equality filter on one
-- (`attr.user = "u4242"`) finds its traces through it instead of testing each trace
-- of the run or project (see store/src/filter_terms.rs).
CREATE INDEX trace_texts_value ON trace_texts (run_id, key, value, trace_id);
