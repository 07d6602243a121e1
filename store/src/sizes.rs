//! Bytes on disk per run and per project. Ingest counts what each write stores
//! (`ingest::sizes`) into `traces.bytes` and `runs.bytes`; a read turns those
//! counts into bytes by the database's own measure of its size, so the runs'
//! sizes add up to the space the database uses and no read ever measures rows.

use super::dialect::{Dialect, Sql};
use super::reader::Reader;
use super::rows::DbRow;
use super::StoreResult;

/// The space the database uses and the weight its runs were counted at: a run's
/// share of the one is its share of the other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SizeScale {
    /// Bytes the database's tables and indexes take (free pages left out).
    pub used: i64,
    /// Every run's counted weight, deleted runs still being removed included.
    pub counted: i64,
    /// The part of `counted` under deleted runs still being removed.
    pub deleting: i64,
}

impl SizeScale {
    /// `counted` (a run's or a project's weight) as bytes on disk.
    pub fn bytes(&self, counted: i64) -> i64 {
        if self.counted <= 0 {
            return 0;
        }
        let share = i128::from(counted.max(0)) * i128::from(self.used) / i128::from(self.counted);
        i64::try_from(share).unwrap_or(i64::MAX)
    }
}

/// What `treeline du` shows: the database's space, and the largest runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DiskUsage {
    /// Bytes the database's tables and indexes take.
    pub used: i64,
    /// Bytes held but free for reuse (SQLite's free pages; 0 on PostgreSQL, whose
    /// dead rows VACUUM reuses in place).
    pub free: i64,
    /// Bytes under runs deleted but not yet removed.
    pub deleting: i64,
    /// Every project, largest first: name, runs, bytes.
    pub projects: Vec<(String, i64, i64)>,
    /// The largest runs (of one project, when asked), largest first: id, project,
    /// name, bytes.
    pub runs: Vec<(String, String, String, i64)>,
}

impl<DB: Dialect> Reader<DB> {
    /// The scale, read in one statement: the space in use and the runs' weights.
    pub(super) async fn size_scale(&self) -> StoreResult<SizeScale> {
        let q = Sql::new(format!(
            "SELECT u.used, \
                    CAST(COALESCE((SELECT SUM(bytes) FROM runs), 0) AS BIGINT) AS live, \
                    CAST(COALESCE((SELECT SUM(bytes) FROM deleted_runs), 0) AS BIGINT) AS deleting \
               FROM ({}) u",
            DB::USED_BYTES
        ));
        let Some(r) = self.row(q).await? else {
            return Ok(SizeScale::default());
        };
        let deleting = r.req_int("deleting")?;
        Ok(SizeScale {
            used: r.req_int("used")?,
            counted: r.req_int("live")?.saturating_add(deleting),
            deleting,
        })
    }

    pub(super) async fn read_table_sizes(&self) -> StoreResult<Vec<(String, i64)>> {
        self.rows(Sql::new(DB::TABLE_BYTES))
            .await?
            .iter()
            .map(|r| Ok((r.req_text("name")?, r.req_int("bytes")?)))
            .collect()
    }

    pub(super) async fn read_disk_usage(
        &self,
        project: Option<&str>,
        limit: usize,
    ) -> StoreResult<DiskUsage> {
        let scale = self.size_scale().await?;
        let free = match self.row(Sql::new(DB::FREE_BYTES)).await? {
            Some(r) => r.req_int("free")?,
            None => 0,
        };
        let projects = self
            .rows(Sql::new(
                "SELECT project, COUNT(*) AS runs, CAST(SUM(bytes) AS BIGINT) AS bytes \
                   FROM runs GROUP BY project ORDER BY SUM(bytes) DESC, project",
            ))
            .await?
            .iter()
            .map(|r| {
                Ok((
                    r.req_text("project")?,
                    r.req_int("runs")?,
                    scale.bytes(r.req_int("bytes")?),
                ))
            })
            .collect::<StoreResult<_>>()?;
        let mut q = Sql::new("SELECT run_id, project, name, bytes FROM runs");
        if let Some(p) = project {
            q.push(" WHERE project = ").bind(p);
        }
        q.push(" ORDER BY bytes DESC, run_id LIMIT ")
            .bind(i64::try_from(limit).unwrap_or(i64::MAX));
        let runs = self
            .rows(q)
            .await?
            .iter()
            .map(|r| {
                Ok((
                    r.req_text("run_id")?,
                    r.req_text("project")?,
                    r.req_text("name")?,
                    scale.bytes(r.req_int("bytes")?),
                ))
            })
            .collect::<StoreResult<_>>()?;
        Ok(DiskUsage {
            used: scale.used,
            free,
            deleting: scale.bytes(scale.deleting),
            projects,
            runs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::SizeScale;

    #[test]
    fn a_share_of_the_counted_weight_is_the_same_share_of_the_space() {
        let scale = SizeScale {
            used: 1_000_000,
            counted: 400,
            deleting: 0,
        };
        assert_eq!(scale.bytes(100), 250_000);
        assert_eq!(scale.bytes(400), 1_000_000);
        assert_eq!(SizeScale::default().bytes(5), 0);
        // Past i64 in the product, the division still answers.
        let huge = SizeScale {
            used: i64::MAX,
            counted: i64::MAX,
            deleting: 0,
        };
        assert_eq!(huge.bytes(i64::MAX), i64::MAX);
    }
}
