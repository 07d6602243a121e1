-- Each metric's last, smallest and largest value, kept as points are written, so
-- the runs list can show and sort by them without reading whole series
-- (store/src/run_writes.rs keeps it; docs/api.md §8.2 reads it).
CREATE TABLE metric_summaries (
    run_id     TEXT NOT NULL,
    key        TEXT NOT NULL,
    last_step  INTEGER NOT NULL,
    last_value REAL NOT NULL,
    min_value  REAL NOT NULL,
    max_value  REAL NOT NULL,
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;

INSERT INTO metric_summaries (run_id, key, last_step, last_value, min_value, max_value)
SELECT p.run_id, p.key, MAX(p.step),
       (SELECT l.value FROM metric_points l
         WHERE l.run_id = p.run_id AND l.key = p.key ORDER BY l.step DESC LIMIT 1),
       MIN(p.value), MAX(p.value)
FROM metric_points p
GROUP BY p.run_id, p.key;
