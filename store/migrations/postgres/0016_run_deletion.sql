-- Runs being deleted (store/src/run_deletion.rs). The run's row goes in the same
-- transaction as this row comes, so no read sees the run again; its data is then
-- removed in bounded batches, and this row goes last: a crash part-way resumes.
CREATE TABLE deleted_runs (
    run_id     TEXT PRIMARY KEY,
    project    TEXT NOT NULL,
    deleted_us BIGINT NOT NULL
);

-- The run an idempotency answer belongs to: a run's deletion forgets its answers,
-- so that a retry after it writes again instead of replaying an answer for data
-- that is gone. Answers kept before this migration carry none.
ALTER TABLE idempotency ADD COLUMN run_id TEXT;
CREATE INDEX idempotency_run ON idempotency (run_id) WHERE run_id IS NOT NULL;
