//! A run's scan read as two halves of its steps at once, on two connections: on
//! SQLite a view over a whole run (a distribution) is bound by one core a query,
//! and a machine has more.

use super::dialect::{Dialect, Sql};
use super::reader::Reader;
use super::rows::DbRow;
use super::{StoreResult, TraceQuery};

impl<DB: Dialect> Reader<DB> {
    /// The query's steps in two halves, or the query alone when its run has at most
    /// one step in range (or the database reads in parallel itself). The halves
    /// hold only traces that have a step.
    pub(super) async fn step_halves(&self, query: &TraceQuery) -> StoreResult<Vec<TraceQuery>> {
        if !DB::SCAN_IN_HALVES {
            return Ok(vec![query.clone()]);
        }
        self.run_halves(query).await
    }

    /// [`Reader::step_halves`] on either database: for reads that build no hash
    /// table (ranges of an index read in order), which PostgreSQL does not run in
    /// parallel itself.
    pub(super) async fn run_halves(&self, query: &TraceQuery) -> StoreResult<Vec<TraceQuery>> {
        let Some(run_id) = query.run_id.as_deref() else {
            return Ok(vec![query.clone()]);
        };
        // Two subqueries: each of MIN and MAX alone is one seek in the index.
        let mut q = Sql::new("SELECT (SELECT MIN(step) FROM traces WHERE run_id = ");
        q.bind(run_id)
            .push(") AS lo, (SELECT MAX(step) FROM traces WHERE run_id = ")
            .bind(run_id)
            .push(") AS hi");
        let Some(row) = self.rows(q).await?.into_iter().next() else {
            return Ok(vec![query.clone()]);
        };
        let (Some(lo), Some(hi)) = (row.int("lo")?, row.int("hi")?) else {
            return Ok(vec![query.clone()]);
        };
        Ok(halves(query, lo, hi))
    }
}

/// `query` cut at the middle of its run's steps `lo..=hi`.
fn halves(query: &TraceQuery, lo: i64, hi: i64) -> Vec<TraceQuery> {
    let lo = lo.max(query.min_step.unwrap_or(i64::MIN));
    let hi = hi.min(query.max_step.unwrap_or(i64::MAX));
    if hi <= lo {
        return vec![query.clone()];
    }
    // i128: the middle of i64::MIN and i64::MAX does not fit their sum.
    let mid = ((i128::from(lo) + i128::from(hi)) / 2) as i64;
    let part = |min: i64, max: i64| TraceQuery {
        min_step: Some(min),
        max_step: Some(max),
        ..query.clone()
    };
    vec![part(lo, mid), part(mid + 1, hi)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(q: &TraceQuery) -> (Option<i64>, Option<i64>) {
        (q.min_step, q.max_step)
    }

    #[test]
    fn halves_cover_the_steps_in_range_once() {
        let q = TraceQuery::default();
        let parts = halves(&q, 0, 199);
        let ranges: Vec<_> = parts.iter().map(range).collect();
        assert_eq!(ranges, vec![(Some(0), Some(99)), (Some(100), Some(199))]);
        let q = TraceQuery {
            min_step: Some(150),
            ..TraceQuery::default()
        };
        let ranges: Vec<_> = halves(&q, 0, 199).iter().map(range).collect();
        assert_eq!(ranges, vec![(Some(150), Some(174)), (Some(175), Some(199))]);
        assert_eq!(halves(&q, 0, 150).len(), 1);
        let wide: Vec<_> = halves(&TraceQuery::default(), i64::MIN, i64::MAX)
            .iter()
            .map(range)
            .collect();
        assert_eq!(
            wide,
            vec![(Some(i64::MIN), Some(0)), (Some(1), Some(i64::MAX))]
        );
    }
}
