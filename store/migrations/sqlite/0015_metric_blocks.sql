-- Each metric's points in blocks of 32 and of 256 steps (block = step / width),
-- each reduced to its count, first and last step (with their times) and extremes:
-- a chart of a long series reads these instead of every point
-- (store/src/metric_blocks.rs).
CREATE TABLE metric_blocks (
    run_id     TEXT NOT NULL,
    key        TEXT NOT NULL,
    width      BIGINT NOT NULL,
    block      BIGINT NOT NULL,
    points     BIGINT NOT NULL,
    first_step BIGINT NOT NULL,
    last_step  BIGINT NOT NULL,
    min_value  REAL NOT NULL,
    max_value  REAL NOT NULL,
    first_ts   BIGINT,
    last_ts    BIGINT,
    PRIMARY KEY (run_id, key, width, block)
) WITHOUT ROWID;

INSERT INTO metric_blocks (run_id, key, width, block, points, first_step, last_step,
                           min_value, max_value)
SELECT run_id, key, 32, step / 32, COUNT(*), MIN(step), MAX(step), MIN(value), MAX(value)
FROM metric_points
GROUP BY run_id, key, step / 32;

INSERT INTO metric_blocks (run_id, key, width, block, points, first_step, last_step,
                           min_value, max_value)
SELECT run_id, key, 256, step / 256, COUNT(*), MIN(step), MAX(step), MIN(value), MAX(value)
FROM metric_points
GROUP BY run_id, key, step / 256;

UPDATE metric_blocks SET
    first_ts = (SELECT p.ts FROM metric_points p WHERE p.run_id = metric_blocks.run_id
                AND p.key = metric_blocks.key AND p.step = metric_blocks.first_step),
    last_ts = (SELECT p.ts FROM metric_points p WHERE p.run_id = metric_blocks.run_id
               AND p.key = metric_blocks.key AND p.step = metric_blocks.last_step);
