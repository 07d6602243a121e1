-- What each trace's and run's rows weigh, counted at ingest (store/src/ingest/sizes.rs,
-- whose weights the sums below repeat): a read turns a run's share of the counted
-- weight into its share of the database's size (store/src/sizes.rs). Rows stored
-- before this version are counted here once.
ALTER TABLE traces ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE deleted_runs ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0;

UPDATE traces t SET bytes = 200 + 3 * octet_length(t.trace_id) + octet_length(t.attributes::text)
     + COALESCE(s.bytes, 0)
  FROM (SELECT run_id, trace_id,
               SUM(160 + 3 * (octet_length(trace_id) + octet_length(span_id)) + octet_length(name)
                   + octet_length(attributes::text) + octet_length(metrics::text)
                   + octet_length(links::text)
                   + 3 * (COALESCE(octet_length(input), 0) + COALESCE(octet_length(output), 0)
                          + COALESCE(octet_length(error), 0)) / 2) AS bytes
          FROM spans GROUP BY run_id, trace_id) s
 WHERE s.run_id = t.run_id AND s.trace_id = t.trace_id;
UPDATE traces SET bytes = 200 + 3 * octet_length(trace_id) + octet_length(attributes::text)
 WHERE bytes = 0;

UPDATE runs r SET bytes = COALESCE((
    SELECT SUM(t.bytes) FROM traces t WHERE t.run_id = r.run_id), 0) + COALESCE((
    SELECT SUM(40 + octet_length(m.key)) FROM metric_points m WHERE m.run_id = r.run_id), 0);
