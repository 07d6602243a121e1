//! Each metric's points in blocks of 32 and of 256 steps ([`WIDTHS`]), each reduced
//! to its count, first and last step (with their times) and extremes
//! (`metric_blocks`), kept in the transaction that writes the points. A chart of
//! 100,000 points then reads about 400 blocks instead of every point, and one zoomed
//! to 20,000 steps about 600.
//!
//! As with the summaries, a batch that only adds later steps merges into its
//! blocks; one that reaches back to a stored step has each block it touched summed
//! up again from the points.

use std::collections::BTreeMap;

use treeline_wire::MetricPoint;

use super::dialect::{Dialect, Sql};
use super::rows::DbRow;
use super::statements::push_rows;
use super::StoreResult;

/// Steps per block, narrowest first: each series is kept at both widths.
pub(super) const WIDTHS: [i64; 2] = [32, 256];
/// The width the summaries are summed up from when a batch reaches back.
pub(super) const WIDEST: i64 = WIDTHS[WIDTHS.len() - 1];
/// Blocks per statement, under both databases' bound-parameter limits (11 each;
/// SQLite's is 32,766).
const BLOCK_CHUNK: usize = 2_000;

/// A block's points, reduced (also a chart's bucket: one or more blocks, or points).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Block {
    pub points: i64,
    pub first_step: i64,
    pub last_step: i64,
    pub min_value: f64,
    pub max_value: f64,
    pub first_ts: Option<i64>,
    pub last_ts: Option<i64>,
}

impl Block {
    /// One point as a block of its own.
    pub(super) fn point(step: i64, value: f64, ts: Option<i64>) -> Self {
        Block {
            points: 1,
            first_step: step,
            last_step: step,
            min_value: value,
            max_value: value,
            first_ts: ts,
            last_ts: ts,
        }
    }

    /// Takes `other` in: points of steps this block does not hold.
    pub(super) fn absorb(&mut self, other: &Block) {
        self.points += other.points;
        if other.first_step < self.first_step {
            self.first_step = other.first_step;
            self.first_ts = other.first_ts;
        }
        if other.last_step > self.last_step {
            self.last_step = other.last_step;
            self.last_ts = other.last_ts;
        }
        self.min_value = self.min_value.min(other.min_value);
        self.max_value = self.max_value.max(other.max_value);
    }
}

/// The batch's blocks of `width` steps by key and block number. `points` repeat no
/// (key, step).
fn blocks_of<'a>(points: &[&'a MetricPoint], width: i64) -> BTreeMap<(&'a str, i64), Block> {
    let mut out: BTreeMap<(&str, i64), Block> = BTreeMap::new();
    for p in points {
        let one = Block::point(p.step, p.value, p.ts);
        out.entry((&p.key, p.step / width))
            .and_modify(|b| b.absorb(&one))
            .or_insert(one);
    }
    out
}

/// Brings the run's blocks up to date with `points`, just stored in `conn`'s
/// transaction; `reached` are the keys the batch reached back into.
pub(super) async fn keep<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: &str,
    points: &[&MetricPoint],
    reached: &[String],
) -> StoreResult<()> {
    for width in WIDTHS {
        keep_width::<DB>(conn, run_id, points, reached, width).await?;
    }
    Ok(())
}

async fn keep_width<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: &str,
    points: &[&MetricPoint],
    reached: &[String],
    width: i64,
) -> StoreResult<()> {
    let blocks = blocks_of(points, width);
    let (merged, recounted): (Vec<_>, Vec<_>) = blocks
        .iter()
        .partition(|((key, _), _)| !reached.iter().any(|r| r == key));
    for chunk in merged.chunks(BLOCK_CHUNK) {
        let mut q = Sql::<DB>::new(
            "INSERT INTO metric_blocks (run_id, key, width, block, points, first_step, \
             last_step, min_value, max_value, first_ts, last_ts) ",
        );
        push_rows(&mut q, chunk, |((key, block), b)| {
            [
                run_id.into(),
                (*key).into(),
                width.into(),
                (*block).into(),
                b.points.into(),
                b.first_step.into(),
                b.last_step.into(),
                b.min_value.into(),
                b.max_value.into(),
                b.first_ts.into(),
                b.last_ts.into(),
            ]
        });
        let (least, greatest) = (DB::LEAST, DB::GREATEST);
        q.push(format!(
            " ON CONFLICT (run_id, key, width, block) DO UPDATE SET \
             points = metric_blocks.points + excluded.points, \
             first_ts = CASE WHEN excluded.first_step < metric_blocks.first_step \
                 THEN excluded.first_ts ELSE metric_blocks.first_ts END, \
             first_step = {least}(metric_blocks.first_step, excluded.first_step), \
             last_ts = CASE WHEN excluded.last_step > metric_blocks.last_step \
                 THEN excluded.last_ts ELSE metric_blocks.last_ts END, \
             last_step = {greatest}(metric_blocks.last_step, excluded.last_step), \
             min_value = {least}(metric_blocks.min_value, excluded.min_value), \
             max_value = {greatest}(metric_blocks.max_value, excluded.max_value)"
        ));
        DB::execute(&mut *conn, q).await?;
    }
    for ((key, block), _) in recounted {
        recount::<DB>(conn, run_id, key, (width, *block)).await?;
    }
    Ok(())
}

/// Sums block `block` of `width` steps of `key` up again from its stored points.
async fn recount<DB: Dialect>(
    conn: &mut DB::Connection,
    run_id: &str,
    key: &str,
    (width, block): (i64, i64),
) -> StoreResult<()> {
    let (from, to) = (block * width, block * width + (width - 1));
    let mut q = Sql::<DB>::new(
        "INSERT INTO metric_blocks (run_id, key, width, block, points, first_step, \
         last_step, min_value, max_value) SELECT ",
    );
    q.bind(run_id)
        .push(", ")
        .bind(key)
        .push(", ")
        .bind(width)
        .push(", ")
        .bind(block);
    q.push(
        ", COUNT(*), MIN(step), MAX(step), MIN(value), MAX(value) \
         FROM metric_points WHERE run_id = ",
    )
    .bind(run_id)
    .push(" AND key = ")
    .bind(key)
    .push(" AND step BETWEEN ")
    .bind(from)
    .push(" AND ")
    .bind(to)
    .push(
        " ON CONFLICT (run_id, key, width, block) DO UPDATE SET points = excluded.points, \
         first_step = excluded.first_step, last_step = excluded.last_step, \
         min_value = excluded.min_value, max_value = excluded.max_value",
    );
    DB::execute(&mut *conn, q).await?;
    const AT: &str = "FROM metric_points p WHERE p.run_id = b.run_id AND p.key = b.key";
    let mut q = Sql::<DB>::new(format!(
        "UPDATE metric_blocks AS b SET \
         first_ts = (SELECT p.ts {AT} AND p.step = b.first_step), \
         last_ts = (SELECT p.ts {AT} AND p.step = b.last_step) \
         WHERE b.run_id = "
    ));
    q.bind(run_id)
        .push(" AND b.key = ")
        .bind(key)
        .push(" AND b.width = ")
        .bind(width)
        .push(" AND b.block = ")
        .bind(block);
    DB::execute(conn, q).await?;
    Ok(())
}

/// A row of [`select`].
pub(super) fn block_row(r: &impl DbRow) -> StoreResult<Block> {
    Ok(Block {
        points: r.req_int("points")?,
        first_step: r.req_int("first_step")?,
        last_step: r.req_int("last_step")?,
        min_value: r.req_float("min_value")?,
        max_value: r.req_float("max_value")?,
        first_ts: r.int("first_ts")?,
        last_ts: r.int("last_ts")?,
    })
}

/// `key`'s blocks of `width` steps numbered `first..=last`, in order.
pub(super) fn select<'a, DB: Dialect>(
    run_id: &'a str,
    key: &'a str,
    width: i64,
    (first, last): (i64, i64),
) -> Sql<'a, DB> {
    let mut q = Sql::new(
        "SELECT points, first_step, last_step, min_value, max_value, first_ts, last_ts \
         FROM metric_blocks WHERE run_id = ",
    );
    q.bind(run_id)
        .push(" AND key = ")
        .bind(key)
        .push(" AND width = ")
        .bind(width)
        .push(" AND block >= ")
        .bind(first)
        .push(" AND block <= ")
        .bind(last)
        .push(" ORDER BY block");
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_falls_into_blocks_of_256_steps() {
        let point = |step, value, ts| MetricPoint {
            key: "loss".into(),
            step,
            value,
            ts,
        };
        let points = [
            point(300, 1.0, Some(3)),
            point(255, 5.0, None),
            point(256, -1.0, Some(1)),
            point(0, 2.0, Some(0)),
        ];
        let refs: Vec<&MetricPoint> = points.iter().collect();
        let blocks = blocks_of(&refs, 256);
        assert_eq!(blocks.len(), 2);
        let first = &blocks[&("loss", 0)];
        assert_eq!(
            (
                first.points,
                first.first_step,
                first.last_step,
                first.first_ts,
                first.last_ts
            ),
            (2, 0, 255, Some(0), None)
        );
        let second = &blocks[&("loss", 1)];
        assert_eq!((second.min_value, second.max_value), (-1.0, 1.0));
        assert_eq!((second.first_ts, second.last_ts), (Some(1), Some(3)));
    }
}
