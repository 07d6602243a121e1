-- Traces whose root failed, apart from every trace with a failure in it
-- (errored_count), so the runs list tells failed rollouts from recovered ones.
ALTER TABLE runs ADD COLUMN failed_count BIGINT NOT NULL DEFAULT 0;
UPDATE runs SET failed_count =
    (SELECT COUNT(*) FROM traces t WHERE t.run_id = runs.run_id AND t.status = 'error');
