-- Each project's retention policy (store/src/retention.rs): closed traces not
-- updated for `traces_days` are removed, a bounded batch at a time; with
-- `drop_runs`, so is a run left with no traces that has not been written to within
-- the window. A project without a row keeps everything.
CREATE TABLE retention_policies (
    project     TEXT PRIMARY KEY,
    traces_days BIGINT NOT NULL,
    drop_runs   BIGINT NOT NULL,
    updated_us  BIGINT NOT NULL
);
