//! A list's annotation filters, looked up in the annotations before the list reads a
//! trace. A filter that only a few traces pass (a rare label, a value nobody wrote)
//! becomes the list of those traces, which the list starts from: probing each trace
//! for it read every trace of the scope when few or none passed (825 ms p50 on
//! `bench query`'s million traces, for a label nobody wrote). One that many traces
//! pass stays a probe of each trace, since a page of them is soon found.

use treeline_wire::filter::Field;

use super::dialect::{Dialect, Sql};
use super::reader::Reader;
use super::rows::DbRow;
use super::search::{Term, MAX_LISTED};
use super::trace_list::push_note_test;
use super::{StoreResult, TraceQuery};

impl<DB: Dialect> Reader<DB> {
    /// A term for each `note.` filter of the query that few traces pass (its
    /// traces), or `None` when one of them matches no trace in the query's scope.
    pub(super) async fn resolve_notes<'q>(
        &self,
        query: &'q TraceQuery,
    ) -> StoreResult<Option<Vec<Term<'q>>>> {
        let mut terms = Vec::new();
        for filter in &query.filters {
            let Field::Note(name) = &filter.field else {
                continue;
            };
            // Through the index by run and name: of the one run, or of each run of
            // the project (or of every project).
            let mut q = Sql::new("SELECT a.run_id, a.trace_id FROM annotations a WHERE ");
            match (&query.run_id, &query.project) {
                (Some(run_id), _) => {
                    q.push("a.run_id = ").bind(run_id);
                }
                (None, Some(project)) => {
                    q.push("a.run_id IN (SELECT run_id FROM runs WHERE project = ")
                        .bind(project)
                        .push(")");
                }
                (None, None) => {
                    q.push("a.run_id IN (SELECT run_id FROM runs)");
                }
            }
            q.push(" AND a.name = ").bind(name.as_str());
            push_note_test(&mut q, &filter.test);
            q.push(" LIMIT ")
                .bind(i64::try_from(MAX_LISTED + 1).unwrap_or(i64::MAX));
            let rows = self.rows(q).await?;
            if rows.is_empty() {
                return Ok(None);
            }
            // Rows, not traces: one trace's several authors or spans count each.
            if rows.len() > MAX_LISTED {
                continue;
            }
            let mut traces = rows
                .iter()
                .map(|r| Ok((r.req_text("run_id")?, r.req_text("trace_id")?)))
                .collect::<StoreResult<Vec<_>>>()?;
            traces.sort_unstable();
            traces.dedup();
            terms.push(Term::Listed {
                names: Vec::new(),
                traces,
            });
        }
        Ok(Some(terms))
    }
}
