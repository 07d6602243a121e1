-- Runs, with the per-run trace counters the timeline head and the runs list show.
CREATE TABLE runs (
    run_id          TEXT PRIMARY KEY,
    project         TEXT NOT NULL,
    name            TEXT NOT NULL,
    config          TEXT NOT NULL DEFAULT 'null',
    status          TEXT NOT NULL,
    start_us        BIGINT NOT NULL,
    end_us          BIGINT,
    updated_us      BIGINT NOT NULL,
    trace_count     BIGINT NOT NULL DEFAULT 0,
    errored_count   BIGINT NOT NULL DEFAULT 0,
    running_count   BIGINT NOT NULL DEFAULT 0,
    unstepped_count BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX runs_newest ON runs (start_us DESC, run_id DESC);
CREATE INDEX runs_project_newest ON runs (project, start_us DESC, run_id DESC);

CREATE TABLE metric_points (
    run_id TEXT NOT NULL,
    key    TEXT NOT NULL,
    step   BIGINT NOT NULL,
    value  DOUBLE PRECISION NOT NULL,
    ts     BIGINT,
    PRIMARY KEY (run_id, key, step)
);

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
    start_us         BIGINT,
    end_us           BIGINT,
    step             BIGINT,
    rank             BIGINT,
    thread_id        TEXT,
    has_open BOOLEAN NOT NULL,
    has_close BOOLEAN NOT NULL,
    child_count      BIGINT NOT NULL,
    error_count      BIGINT NOT NULL,
    token_count      BIGINT,
    attr_count       BIGINT NOT NULL,
    attributes       TEXT NOT NULL DEFAULT '{}',
    metrics          TEXT NOT NULL DEFAULT '{}',
    links            TEXT NOT NULL DEFAULT '[]',
    input_truncated  BOOLEAN NOT NULL DEFAULT FALSE,
    output_truncated BOOLEAN NOT NULL DEFAULT FALSE,
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
    kinds           BIGINT NOT NULL,
    span_count      BIGINT NOT NULL,
    error_count     BIGINT NOT NULL,
    child_tokens    BIGINT NOT NULL,
    root_tokens     BIGINT,
    iteration_count BIGINT NOT NULL,
    step            BIGINT,
    rank            BIGINT,
    thread_id       TEXT,
    rollout_id      TEXT,
    start_us        BIGINT,
    end_us          BIGINT,
    updated_us      BIGINT NOT NULL,
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
    step    BIGINT NOT NULL,
    traces  BIGINT NOT NULL,
    errored BIGINT NOT NULL,
    running BIGINT NOT NULL,
    PRIMARY KEY (run_id, step)
);

CREATE TABLE idempotency (
    key         TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    status      BIGINT NOT NULL,
    response    TEXT NOT NULL,
    created_us  BIGINT NOT NULL
);
CREATE INDEX idempotency_age ON idempotency (created_us);
