//! One metric of a run as a chart draws it: every point when they fit, else each
//! step bucket's smallest and largest value, reduced by the database so a 100,000
//! point series never crosses the connection whole.

use treeline_wire::MetricSeries;

use super::dialect::{Dialect, Sql};
use super::reader::Reader;
use super::rows::DbRow;
use super::StoreResult;

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

/// A bucket's reduction: its first and last step, its extremes and their times.
struct Bucket {
    first: i64,
    last: i64,
    low: f64,
    high: f64,
    first_ts: Option<i64>,
    last_ts: Option<i64>,
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
        let mut q = Sql::new("SELECT COUNT(*) AS n, MIN(step) AS lo, MAX(step) AS hi");
        in_window(&mut q, run_id, key, from, to);
        let row = self.rows(q).await?.into_iter().next();
        let (stored, lo, hi) = match row {
            Some(r) => (r.int("n")?.unwrap_or(0), r.int("lo")?, r.int("hi")?),
            None => (0, None, None),
        };
        let max_points = window.max_points.max(2);
        let mut series = MetricSeries {
            key: key.to_string(),
            points: Vec::new(),
            ts: Vec::new(),
            downsampled: false,
            stored: u64::try_from(stored).unwrap_or(0),
        };
        let (Some(lo), Some(hi)) = (lo, hi) else {
            return Ok(series);
        };
        if series.stored <= max_points as u64 {
            let mut q = Sql::new("SELECT step, value, ts");
            in_window(&mut q, run_id, key, from, to);
            q.push(" ORDER BY step");
            for r in self.rows(q).await? {
                series
                    .points
                    .push((r.req_int("step")?, r.req_float("value")?));
                series.ts.push(r.int("ts")?);
            }
            return Ok(series);
        }
        // Buckets of equal step width, so the x-axis keeps its scale.
        let buckets = (max_points / 2) as i64;
        let width = (hi.saturating_sub(lo) / buckets).saturating_add(1);
        let mut q = Sql::new(
            "SELECT MIN(step) AS s0, MAX(step) AS s1, MIN(value) AS v0, MAX(value) AS v1, \
             MIN(ts) AS t0, MAX(ts) AS t1",
        );
        in_window(&mut q, run_id, key, from, to);
        q.push(" GROUP BY (step - ")
            .bind(lo)
            .push(") / ")
            .bind(width)
            .push(" ORDER BY s0");
        let mut rows = Vec::new();
        for r in self.rows(q).await? {
            rows.push(Bucket {
                first: r.req_int("s0")?,
                last: r.req_int("s1")?,
                low: r.req_float("v0")?,
                high: r.req_float("v1")?,
                first_ts: r.int("t0")?,
                last_ts: r.int("t1")?,
            });
        }
        series.downsampled = true;
        extremes(&rows, &mut series);
        Ok(series)
    }
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
fn extremes(buckets: &[Bucket], series: &mut MetricSeries) {
    let mut previous: Option<f64> = None;
    for b in buckets {
        if b.first == b.last || b.low == b.high {
            series.points.push((b.first, b.low));
            series.ts.push(b.first_ts);
            previous = Some(b.low);
            continue;
        }
        let high_first = previous.is_some_and(|p| (p - b.high).abs() < (p - b.low).abs());
        let (a, z) = if high_first {
            (b.high, b.low)
        } else {
            (b.low, b.high)
        };
        series.points.extend([(b.first, a), (b.last, z)]);
        series.ts.extend([b.first_ts, b.last_ts]);
        previous = Some(z);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(first: i64, last: i64, low: f64, high: f64) -> Bucket {
        Bucket {
            first,
            last,
            low,
            high,
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
