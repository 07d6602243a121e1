//! Each metric's last, smallest and largest value (`metric_summaries`), kept in the
//! transaction that writes its points, so the runs list reads one row per column
//! instead of a whole series.
//!
//! A batch whose steps all come after the stored last step only adds points, so its
//! own extremes merge into the row. A batch that reaches back to a stored step may
//! have replaced an extreme; those keys are summed up again, from their blocks
//! (`metric_blocks`, a 256th of the points) once those are up to date.

use std::collections::BTreeMap;

use treeline_wire::MetricPoint;

use super::dialect::{Dialect, Sql};
use super::metric_blocks;
use super::rows::DbRow;
use super::statements::push_rows;
use super::StoreResult;

/// Keys per statement, under both databases' bound-parameter limits.
const KEY_CHUNK: usize = 1_000;

/// One key's points in a batch, summed up.
#[derive(Debug, PartialEq)]
struct BatchSummary<'a> {
    key: &'a str,
    first_step: i64,
    last_step: i64,
    last_value: f64,
    min_value: f64,
    max_value: f64,
}

/// The batch's keys, each summed up. `points` repeat no (key, step).
fn summarise<'a>(points: &[&'a MetricPoint]) -> Vec<BatchSummary<'a>> {
    let mut by_key: BTreeMap<&str, BatchSummary> = BTreeMap::new();
    for p in points {
        let s = by_key.entry(&p.key).or_insert(BatchSummary {
            key: &p.key,
            first_step: p.step,
            last_step: p.step,
            last_value: p.value,
            min_value: p.value,
            max_value: p.value,
        });
        s.first_step = s.first_step.min(p.step);
        if p.step >= s.last_step {
            s.last_step = p.step;
            s.last_value = p.value;
        }
        s.min_value = s.min_value.min(p.value);
        s.max_value = s.max_value.max(p.value);
    }
    by_key.into_values().collect()
}

/// Merges `points`, which the caller has just stored in `conn`'s transaction
/// (holding the run's row, so no other metric write of the run runs between the
/// read and the write here), into the run's summaries. Returns the keys the batch
/// reached back into (a step at or before their stored last one): the caller sums
/// those up again with [`recount`] once their blocks are up to date.
pub(super) async fn merge<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: &str,
    points: &[&MetricPoint],
) -> StoreResult<Vec<String>> {
    let batch = summarise(points);
    let mut reached = Vec::new();
    for chunk in batch.chunks(KEY_CHUNK) {
        let reach_back = stored_last_steps::<DB>(conn, run_id, chunk)
            .await?
            .into_iter()
            .filter(|(key, last)| {
                chunk
                    .iter()
                    .any(|s| s.key == key.as_str() && s.first_step <= *last)
            })
            .map(|(key, _)| key)
            .collect::<Vec<String>>();
        let mut q = Sql::<DB>::new(
            "INSERT INTO metric_summaries (run_id, key, last_step, last_value, min_value, max_value) ",
        );
        push_rows(&mut q, chunk, |s| {
            [
                run_id.into(),
                s.key.into(),
                s.last_step.into(),
                s.last_value.into(),
                s.min_value.into(),
                s.max_value.into(),
            ]
        });
        let (least, greatest) = (DB::LEAST, DB::GREATEST);
        q.push(format!(
            " ON CONFLICT (run_id, key) DO UPDATE SET \
             last_value = CASE WHEN excluded.last_step >= metric_summaries.last_step \
                 THEN excluded.last_value ELSE metric_summaries.last_value END, \
             last_step = {greatest}(metric_summaries.last_step, excluded.last_step), \
             min_value = {least}(metric_summaries.min_value, excluded.min_value), \
             max_value = {greatest}(metric_summaries.max_value, excluded.max_value)"
        ));
        DB::execute(&mut *conn, q).await?;
        reached.extend(reach_back);
    }
    Ok(reached)
}

/// The stored last step of each of `batch`'s keys that has a summary.
async fn stored_last_steps<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: &str,
    batch: &[BatchSummary<'_>],
) -> StoreResult<Vec<(String, i64)>> {
    let mut q = Sql::<DB>::new("SELECT key, last_step FROM metric_summaries WHERE run_id = ");
    q.bind(run_id).push(" AND key IN (");
    for (i, s) in batch.iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        q.bind(s.key);
    }
    q.push(")");
    DB::fetch_all_in(conn, q)
        .await?
        .iter()
        .map(|r| Ok((r.req_text("key")?, r.req_int("last_step")?)))
        .collect()
}

/// Sums `key` up again from its blocks, and its last value from its last point.
pub(super) async fn recount<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: &str,
    key: &str,
) -> StoreResult<()> {
    let blocks = format!(
        "FROM metric_blocks b WHERE b.run_id = s.run_id AND b.key = s.key AND b.width = {}",
        metric_blocks::WIDEST
    );
    let mut q = Sql::<DB>::new(format!(
        "UPDATE metric_summaries AS s SET \
         last_step = (SELECT MAX(b.last_step) {blocks}), \
         last_value = (SELECT p.value FROM metric_points p \
             WHERE p.run_id = s.run_id AND p.key = s.key ORDER BY p.step DESC LIMIT 1), \
         min_value = (SELECT MIN(b.min_value) {blocks}), \
         max_value = (SELECT MAX(b.max_value) {blocks}) \
         WHERE s.run_id = "
    ));
    q.bind(run_id).push(" AND s.key = ").bind(key);
    DB::execute(conn, q).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_summed_up_per_key() {
        let point = |key: &str, step, value| MetricPoint {
            key: key.into(),
            step,
            value,
            ts: None,
        };
        let points = [
            point("loss", 5, 2.0),
            point("acc", 1, 0.5),
            point("loss", 3, 9.0),
            point("loss", 7, -1.0),
            point("loss", 6, 4.0),
        ];
        let refs: Vec<&MetricPoint> = points.iter().collect();
        let batch = summarise(&refs);
        assert_eq!(batch.len(), 2);
        assert_eq!(
            batch[1],
            BatchSummary {
                key: "loss",
                first_step: 3,
                last_step: 7,
                last_value: -1.0,
                min_value: -1.0,
                max_value: 9.0,
            }
        );
        assert_eq!((batch[0].key, batch[0].last_value), ("acc", 0.5));
    }
}
