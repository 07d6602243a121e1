-- Runs, with the per-run trace counters the timeline head and the runs list show.
CREATE TABLE runs (
    run_id          TEXT PRIMARY KEY,
    project         TEXT NOT NULL,
    name            TEXT NOT NULL,
    config          TEXT NOT NULL DEFAULT 'null',
    status          TEXT NOT NULL,
    start_us        INTEGER NOT NULL,
    end_us          INTEGER,
    updated_us      INTEGER NOT NULL,
    trace_count     INTEGER NOT NULL DEFAULT 0,
    errored_count   INTEGER NOT NULL DEFAULT 0,
    running_count   INTEGER NOT NULL DEFAULT 0,
    unstepped_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_newest ON runs (start_us DESC, run_id DESC);
CREATE INDEX runs_project_newest ON runs (project, start_us DESC, run_id DESC);

CREATE TABLE metric_points (
    run_id TEXT NOT NULL,
    key    TEXT NOT NULL,
    step   INTEGER NOT NULL,
    value  REAL NOT NULL,
    ts     INTEGER,
    PRIMARY KEY (run_id, key, step)
) WITHOUT ROWID;

-- Full spans. Light columns first: bodies sit last so list reads skip them.
CREATE TABLE spans (
    run_id           TEXT NOT NULL,
    trace_id         TEXT NOT NULL,
    span_id          TEXT NOT NULL,
    parent_span_id   TEXT,
    tree_parent      TEXT,
    name             TEXT NOT NULL,
    kind             TEXT,
    status           TEXT NOT NULL,
    start_us         INTEGER,
    end_us           INTEGER,
    step             INTEGER,
    rank             INTEGER,
    thread_id        TEXT,
    has_open         INTEGER NOT NULL,
    has_close        INTEGER NOT NULL,
    child_count      INTEGER NOT NULL,
    error_count      INTEGER NOT NULL,
    token_count      INTEGER,
    attr_count       INTEGER NOT NULL,
    attributes       TEXT NOT NULL DEFAULT '{}',
    metrics          TEXT NOT NULL DEFAULT '{}',
    links            TEXT NOT NULL DEFAULT '[]',
    input_truncated  INTEGER NOT NULL DEFAULT 0,
    output_truncated INTEGER NOT NULL DEFAULT 0,
    input            TEXT,
    output           TEXT,
    error            TEXT,
    PRIMARY KEY (run_id, trace_id, span_id)
);
-- Lazy children (and roots, under ''), in start order.
CREATE INDEX spans_children ON spans (run_id, trace_id, tree_parent, start_us, span_id)
    WHERE tree_parent IS NOT NULL;

-- One summary per trace, maintained at ingest.
CREATE TABLE traces (
    run_id          TEXT NOT NULL,
    trace_id        TEXT NOT NULL,
    project         TEXT NOT NULL,
    root_span_id    TEXT,
    name            TEXT NOT NULL,
    kind            TEXT,
    status          TEXT NOT NULL,
    kinds           INTEGER NOT NULL,
    span_count      INTEGER NOT NULL,
    error_count     INTEGER NOT NULL,
    child_tokens    INTEGER NOT NULL,
    root_tokens     INTEGER,
    iteration_count INTEGER NOT NULL,
    step            INTEGER,
    rank            INTEGER,
    thread_id       TEXT,
    rollout_id      TEXT,
    start_us        INTEGER,
    end_us          INTEGER,
    updated_us      INTEGER NOT NULL,
    attributes      TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, trace_id)
);
CREATE INDEX traces_run_updated ON traces (run_id, updated_us DESC, trace_id DESC);
CREATE INDEX traces_run_step ON traces (run_id, step, updated_us DESC, trace_id DESC);
CREATE INDEX traces_project_updated ON traces (project, updated_us DESC, run_id DESC, trace_id DESC);
CREATE INDEX traces_updated ON traces (updated_us DESC, run_id DESC, trace_id DESC);

-- Per-step trace activity for the timeline, maintained at ingest.
CREATE TABLE step_activity (
    run_id  TEXT NOT NULL,
    step    INTEGER NOT NULL,
    traces  INTEGER NOT NULL,
    errored INTEGER NOT NULL,
    running INTEGER NOT NULL,
    PRIMARY KEY (run_id, step)
) WITHOUT ROWID;

CREATE TABLE idempotency (
    key         TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    status      INTEGER NOT NULL,
    response    TEXT NOT NULL,
    created_us  INTEGER NOT NULL
);
CREATE INDEX idempotency_age ON idempotency (created_us);
