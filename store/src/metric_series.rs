//! One metric of a run as a chart draws it: every point when they fit, else each
//! step bucket's smallest and largest value, reduced by the database so a 100,000
//! point series never crosses the connection whole.

use treeline_wire::MetricSeries;

use super::dialect::{Dialect, Sql};
use super::metric_blocks::{self, Block, WIDTHS};
use super::reader::Reader;
use super::rows::DbRow;
use super::{StoreError, StoreResult};

/// Which part of a series to read, and how many points may come back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesWindow {
    /// At least 2.
    pub max_points: usize,
    pub min_step: Option<i64>,
    pub max_step: Option<i64>,
}

impl SeriesWindow {
    pub fn points(max_points: usize) -> Self {
        SeriesWindow {
            max_points,
            min_step: None,
            max_step: None,
        }
    }
}

impl<DB: Dialect> Reader<DB> {
    pub(super) async fn read_metric_series(
        &self,
        run_id: &str,
        key: &str,
        window: SeriesWindow,
    ) -> StoreResult<MetricSeries> {
        let (from, to) = (
            window.min_step.unwrap_or(0),
            window.max_step.unwrap_or(i64::MAX),
        );
        // The window's first and last step, by two index seeks.
        let mut q = Sql::new("SELECT (SELECT step");
        in_window(&mut q, run_id, key, from, to);
        q.push(" ORDER BY step LIMIT 1) AS lo, (SELECT step");
        in_window(&mut q, run_id, key, from, to);
        q.push(" ORDER BY step DESC LIMIT 1) AS hi");
        let row = self.rows(q).await?.into_iter().next();
        let (lo, hi) = match row {
            Some(r) => (r.int("lo")?, r.int("hi")?),
            None => (None, None),
        };
        let max_points = window.max_points.max(2);
        let mut series = MetricSeries {
            key: key.to_string(),
            points: Vec::new(),
            ts: Vec::new(),
            downsampled: false,
            stored: 0,
        };
        let (Some(lo), Some(hi)) = (lo, hi) else {
            return Ok(series);
        };
        // Steps are unique, so a window of few steps holds few points.
        let fits = hi.saturating_sub(lo) < max_points as i64;
        // Buckets of equal step width, `max_points / 2` of them, so the x-axis keeps
        // its scale.
        let width = (hi.saturating_sub(lo) / (max_points / 2).max(1) as i64).saturating_add(1);
        let buckets = if fits {
            Vec::new()
        } else if let Some(block) = WIDTHS.iter().rev().copied().find(|&w| width >= w) {
            self.block_buckets(run_id, key, block, (from, to), (lo, hi), width)
                .await?
        } else {
            self.buckets(run_id, key, (lo, hi), width).await?
        };
        let stored: i64 = buckets.iter().map(|b| b.points).sum();
        if fits || stored <= max_points as i64 {
            for p in self.read_points(run_id, key, from, to).await? {
                series.points.push((p.first_step, p.min_value));
                series.ts.push(p.first_ts);
            }
            series.stored = series.points.len() as u64;
            return Ok(series);
        }
        series.stored = u64::try_from(stored).unwrap_or(0);
        series.downsampled = true;
        extremes(&buckets, &mut series);
        Ok(series)
    }
}

impl<DB: Dialect> Reader<DB> {
    /// As [`Self::buckets`], from the stored blocks of `block` steps (each bucket one
    /// or more of them, a block counted in the bucket of its first step), with the
    /// window's ragged ends read as points.
    async fn block_buckets(
        &self,
        run_id: &str,
        key: &str,
        block: i64,
        (from, to): (i64, i64),
        (lo, hi): (i64, i64),
        width: i64,
    ) -> StoreResult<Vec<Block>> {
        let first_full = from.div_euclid(block) + i64::from(from.rem_euclid(block) != 0);
        let last_full = to.div_euclid(block) - i64::from(to.rem_euclid(block) != block - 1);
        if first_full > last_full {
            return self.buckets(run_id, key, (lo, hi), width).await;
        }
        let mut parts: Vec<Block> = Vec::new();
        let first_start = first_full.saturating_mul(block);
        if first_start > lo {
            parts.extend(self.read_points(run_id, key, lo, first_start - 1).await?);
        }
        let q = metric_blocks::select::<DB>(run_id, key, block, (first_full, last_full));
        for r in self.rows(q).await? {
            parts.push(metric_blocks::block_row(&r)?);
        }
        // None: the last whole block ends at the largest step there is.
        if let Some(after) = last_full.checked_add(1).and_then(|b| b.checked_mul(block)) {
            if after <= hi {
                parts.extend(self.read_points(run_id, key, after, hi).await?);
            }
        }
        let mut out: Vec<(i64, Block)> = Vec::new();
        for part in parts {
            let at = (part.first_step - lo) / width;
            match out.last_mut() {
                Some((i, b)) if *i == at => b.absorb(&part),
                _ => out.push((at, part)),
            }
        }
        Ok(out.into_iter().map(|(_, b)| b).collect())
    }

    /// The points of steps `from..=to` in step order, each as a block of one.
    async fn read_points(
        &self,
        run_id: &str,
        key: &str,
        from: i64,
        to: i64,
    ) -> StoreResult<Vec<Block>> {
        let mut q = Sql::new("SELECT step, value, ts");
        in_window(&mut q, run_id, key, from, to);
        q.push(" ORDER BY step");
        self.rows(q)
            .await?
            .iter()
            .map(|r| {
                Ok(Block::point(
                    r.req_int("step")?,
                    r.req_float("value")?,
                    r.int("ts")?,
                ))
            })
            .collect()
    }

    /// The steps `lo..=hi` in buckets of `width` steps, each reduced to its count,
    /// first and last step, extremes and times; empty buckets left out. Each bucket is read by index
    /// range: grouping the whole window by an expression made the database sort it.
    async fn buckets(
        &self,
        run_id: &str,
        key: &str,
        (lo, hi): (i64, i64),
        width: i64,
    ) -> StoreResult<Vec<Block>> {
        // The buckets the steps reach; the last ends at `hi`, so no bound overflows.
        let used = hi.saturating_sub(lo) / width + 1;
        // Our own numbers, not a caller's text: written into the statement as they are.
        let mut q = Sql::<DB>::new(format!(
            "WITH RECURSIVE b(i) AS (SELECT CAST(0 AS BIGINT) UNION ALL \
             SELECT i + 1 FROM b WHERE i + 1 < {used}), \
             r(lo, hi) AS (SELECT {lo} + i * {width}, \
             CASE WHEN i = {last} THEN {hi} ELSE {lo} + i * {width} + {width} - 1 END FROM b) \
             SELECT ",
            last = used - 1,
        ));
        // One pass over each bucket for its count, steps and extremes; its times by
        // two seeks.
        let parts = [
            DB::packed(
                &["COUNT(*)", "MIN(step)", "MAX(step)"],
                &["MIN(value)", "MAX(value)"],
            ),
            "ts".to_string(),
            "ts".to_string(),
        ];
        let order = ["", " ORDER BY step LIMIT 1", " ORDER BY step DESC LIMIT 1"];
        let names = ["agg", "t0", "t1"];
        for i in 0..3 {
            if i > 0 {
                q.push(", ");
            }
            q.push(format!(
                "(SELECT {} FROM metric_points WHERE run_id = ",
                parts[i]
            ))
            .bind(run_id)
            .push(" AND key = ")
            .bind(key)
            .push(format!(
                " AND step BETWEEN r.lo AND r.hi{}) AS {}",
                order[i], names[i]
            ));
        }
        q.push(" FROM r ORDER BY r.lo");
        let mut rows = Vec::new();
        for r in self.rows(q).await? {
            let agg = r.text("agg")?.unwrap_or_default();
            let Some(bucket) = unpack(&agg, r.int("t0")?, r.int("t1")?)? else {
                continue;
            };
            rows.push(bucket);
        }
        Ok(rows)
    }
}

/// A bucket from its packed count, steps and extremes; `None` when it is empty.
fn unpack(agg: &str, first_ts: Option<i64>, last_ts: Option<i64>) -> StoreResult<Option<Block>> {
    let bad = || StoreError::Corrupt(format!("a metric bucket read as {agg:?}"));
    let mut parts = agg.split(',');
    let mut next = || parts.next().ok_or_else(bad);
    let points: i64 = next()?.parse().map_err(|_| bad())?;
    if points == 0 {
        return Ok(None);
    }
    Ok(Some(Block {
        points,
        first_step: next()?.parse().map_err(|_| bad())?,
        last_step: next()?.parse().map_err(|_| bad())?,
        min_value: next()?.parse().map_err(|_| bad())?,
        max_value: next()?.parse().map_err(|_| bad())?,
        first_ts,
        last_ts,
    }))
}

/// `FROM metric_points WHERE` the run's key, steps `from..=to`.
fn in_window<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    run_id: &'a str,
    key: &'a str,
    from: i64,
    to: i64,
) {
    q.push(" FROM metric_points WHERE run_id = ")
        .bind(run_id)
        .push(" AND key = ")
        .bind(key)
        .push(" AND step >= ")
        .bind(from)
        .push(" AND step <= ")
        .bind(to);
}

/// Each bucket as two points at its first and last step: its extreme nearer the
/// line so far first, so a falling curve is drawn falling. Where exactly in the
/// bucket each extreme fell is not kept: a bucket is a few pixels wide.
fn extremes(buckets: &[Block], series: &mut MetricSeries) {
    let mut previous: Option<f64> = None;
    for b in buckets {
        let (low, high) = (b.min_value, b.max_value);
        if b.first_step == b.last_step || low == high {
            series.points.push((b.first_step, low));
            series.ts.push(b.first_ts);
            previous = Some(low);
            continue;
        }
        let high_first = previous.is_some_and(|p| (p - high).abs() < (p - low).abs());
        let (a, z) = if high_first { (high, low) } else { (low, high) };
        series.points.extend([(b.first_step, a), (b.last_step, z)]);
        series.ts.extend([b.first_ts, b.last_ts]);
        previous = Some(z);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(first: i64, last: i64, low: f64, high: f64) -> Block {
        Block {
            points: 2,
            first_step: first,
            last_step: last,
            min_value: low,
            max_value: high,
            first_ts: Some(first * 10),
            last_ts: Some(last * 10),
        }
    }

    #[test]
    fn a_falling_curve_is_drawn_falling_and_a_flat_bucket_is_one_point() {
        let mut s = MetricSeries {
            key: "loss".into(),
            points: vec![],
            ts: vec![],
            downsampled: true,
            stored: 0,
        };
        extremes(
            &[
                bucket(0, 9, 8.0, 10.0),
                bucket(10, 19, 5.0, 7.0),
                bucket(20, 29, 4.0, 4.0),
            ],
            &mut s,
        );
        assert_eq!(
            s.points,
            vec![(0, 8.0), (9, 10.0), (10, 7.0), (19, 5.0), (20, 4.0)]
        );
        assert_eq!(s.ts.len(), s.points.len());
        assert_eq!(s.ts[1], Some(90));
    }
}
