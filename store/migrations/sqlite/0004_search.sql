-- Search without reading every trace: the distinct trace names of each project (a
-- term's names are found here, among a few hundred rows instead of a million), and
-- the ids lower-cased, so that "starts with" is a range on an index. A name stays
-- after its traces have renamed: the list is a superset, which the query then tests.
CREATE TABLE trace_names (
    project TEXT NOT NULL,
    name    TEXT NOT NULL,
    PRIMARY KEY (project, name)
);
INSERT INTO trace_names (project, name) SELECT DISTINCT project, name FROM traces;

CREATE INDEX traces_trace_prefix ON traces (lower(trace_id), project, run_id, trace_id);
CREATE INDEX traces_rollout_prefix ON traces (lower(rollout_id), project, run_id, trace_id)
    WHERE rollout_id IS NOT NULL;
CREATE INDEX traces_thread_prefix ON traces (lower(thread_id), project, run_id, trace_id)
    WHERE thread_id IS NOT NULL;

-- "Failed beneath" (error_count > 0), the workspace's quick filter: a run's failed
-- traces, without reading the others (a tenth of them on the benchmark's runs).
CREATE INDEX traces_run_failed ON traces (run_id, updated_us DESC, trace_id DESC)
    WHERE error_count > 0;
