//! Search terms, resolved through indexes before the list query reads a trace. A
//! term matches a trace whose name contains it or whose trace, rollout or thread id
//! starts with it, case ignored as the database's LIKE ignores it. The names that
//! contain it come from `trace_names` (a project's distinct names: hundreds of rows,
//! not millions), the ids that start with it from the prefix indexes. A term that
//! matches nothing ends the query at once; one that matches a few names or ids
//! becomes a list of them.

use std::collections::HashSet;

use super::body_text::{BodySearch, TextTraces, TraceKey};
use super::dialect::{Dialect, Sql};
use super::reader::Reader;
use super::rows::{self, DbRow};
use super::statements::push_rows;
use super::{StoreResult, TraceQuery};
use treeline_wire::filter::TraceFilter;

/// Names or traces listed per term at most; past it, the term is tested on each
/// trace the list reads, as a pattern (it then matches often, so a page fills soon).
const MAX_LISTED: usize = 500;

/// The id columns a term is a prefix of.
const ID_COLUMNS: [&str; 3] = ["trace_id", "rollout_id", "thread_id"];
/// Their prefix indexes (migration 0004), in the same order.
const PREFIX_INDEXES: [&str; 3] = [
    "traces_trace_prefix",
    "traces_rollout_prefix",
    "traces_thread_prefix",
];

/// What one search term, or a filter an index answers, matches.
#[derive(Debug)]
pub(super) enum Term<'q> {
    /// Too many names or ids to list: the term as a pattern on every trace read.
    Pattern(&'q str),
    /// The trace names that contain it, and the traces whose ids start with it.
    Listed {
        names: Vec<String>,
        traces: Vec<(String, String)>,
        /// The filters these traces are exactly the passing traces of (looked up
        /// through an index), which the list then need not test again.
        answers: Vec<&'q TraceFilter>,
    },
    /// A body search matching too many traces to list: the traces of its matches,
    /// gathered once in the list's query.
    TextGathered(BodySearch<'q>),
    /// A body search most traces match: tested on each trace read (a page fills
    /// within a few).
    TextCommon(BodySearch<'q>),
    /// No condition: the code of the name that the list's indexed `span.attr.`
    /// filter tests (`span_index::Indexed`), read before the list so that its
    /// rows are sought by a value. PostgreSQL planned a code read within the query
    /// as any code, and scanned both tables for a name no span carries (27 ms).
    SpanCode(i64),
}

impl Term<'_> {
    fn matches_nothing(&self) -> bool {
        matches!(self, Term::Listed { names, traces, .. } if names.is_empty() && traces.is_empty())
    }

    /// Whether this term's traces are exactly those passing `filter`.
    pub(super) fn answers(&self, filter: &TraceFilter) -> bool {
        matches!(self, Term::Listed { answers, .. } if answers.iter().any(|a| std::ptr::eq(*a, filter)))
    }
}

impl<DB: Dialect> Reader<DB> {
    /// The query's terms resolved, or `None` when one of them matches no trace in
    /// the query's run or project. The filters an index answers and few traces pass
    /// join them as lists of those traces (see `filter_terms`).
    pub(super) async fn resolve_terms<'q>(
        &self,
        query: &'q TraceQuery,
    ) -> StoreResult<Option<Vec<Term<'q>>>> {
        let mut terms = Vec::with_capacity(query.terms.len());
        for term in &query.terms {
            let resolved = self.resolve_term(query, term).await?;
            if resolved.matches_nothing() {
                return Ok(None);
            }
            terms.push(resolved);
        }
        drop_implied_patterns(&mut terms);
        if let Some(text) = &query.text {
            let search = BodySearch::new(query, text);
            match self.text_traces(query, &search).await? {
                TextTraces::Listed(traces) if traces.is_empty() => return Ok(None),
                TextTraces::Listed(traces) => terms.push(Term::Listed {
                    names: Vec::new(),
                    traces,
                    answers: Vec::new(),
                }),
                TextTraces::Gathered(_) => terms.push(Term::TextGathered(search)),
                TextTraces::Common => terms.push(Term::TextCommon(search)),
            }
        }
        match self.resolve_filters(query).await? {
            Some(listed) => terms.extend(listed),
            None => return Ok(None),
        }
        Ok(intersect_listed_traces(&mut terms).then_some(terms))
    }

    async fn resolve_term<'q>(&self, query: &TraceQuery, term: &'q str) -> StoreResult<Term<'q>> {
        let like = DB::LIKE_ANY_CASE;
        let mut q = Sql::new(format!("SELECT name FROM trace_names WHERE name {like} "));
        q.bind(format!("%{}%", rows::escape_like(term)))
            .push(" ESCAPE '\\'");
        push_scope(
            &mut q,
            query,
            "project = (SELECT project FROM runs WHERE run_id = ",
        );
        q.push(" LIMIT ").bind(listed_limit());
        let names = self
            .rows(q)
            .await?
            .iter()
            .map(|r| r.req_text("name"))
            .collect::<StoreResult<Vec<_>>>()?;
        if names.len() > MAX_LISTED {
            return Ok(Term::Pattern(term));
        }

        let low = DB::fold_case(term);
        let high = format!("{low}{}", char::MAX);
        let collate = DB::BYTE_ORDER;
        let mut traces = Vec::new();
        for (column, index) in ID_COLUMNS.into_iter().zip(PREFIX_INDEXES) {
            // The same expression as the prefix index's, so that it is a range on it.
            let mut q = Sql::new(format!(
                "SELECT run_id, trace_id FROM traces{} WHERE {column} IS NOT NULL \
                 AND lower({column}){collate} >= ",
                DB::use_index(index)
            ));
            q.bind(low.clone())
                .push(format!(" AND lower({column}){collate} < "))
                .bind(high.clone());
            push_scope(&mut q, query, "run_id = (");
            q.push(" LIMIT ").bind(listed_limit());
            for r in self.rows(q).await? {
                traces.push((r.req_text("run_id")?, r.req_text("trace_id")?));
            }
        }
        traces.sort_unstable();
        traces.dedup();
        if traces.len() > MAX_LISTED {
            return Ok(Term::Pattern(term));
        }
        Ok(Term::Listed {
            names,
            traces,
            answers: Vec::new(),
        })
    }
}

/// Drops each pattern term that a listed term implies: one whose traces are listed
/// by name only, every name containing the pattern. A search of `rollout step12`,
/// where `rollout` is in too many names to list and `step12` in a few dozen that all
/// hold it, then reads those names alone instead of testing the pattern on each
/// trace (four case-ignoring matches a row, the costly part on PostgreSQL). ASCII
/// case is ignored here, which both databases' matches also ignore, so a dropped
/// pattern is one the database would have found true.
fn drop_implied_patterns(terms: &mut Vec<Term<'_>>) {
    let implied = |pattern: &str| {
        let pattern = pattern.to_ascii_lowercase();
        terms.iter().any(|term| match term {
            Term::Listed { names, traces, .. } => {
                traces.is_empty()
                    && !names.is_empty()
                    && names
                        .iter()
                        .all(|name| name.to_ascii_lowercase().contains(&pattern))
            }
            _ => false,
        })
    };
    let keep: Vec<bool> = terms
        .iter()
        .map(|term| !matches!(term, Term::Pattern(p) if implied(p)))
        .collect();
    let mut keep = keep.into_iter();
    terms.retain(|_| keep.next().unwrap_or(true));
}

/// Merges the terms that list traces by id alone into one, their intersection: a
/// trace passes them all when each list holds it. Left side by side, the lists were
/// compared row by row (PostgreSQL took 200 ms for a run's two annotation filters
/// of 1,000 traces each). False when no trace is in every list.
fn intersect_listed_traces(terms: &mut Vec<Term<'_>>) -> bool {
    let mut merged: Option<Vec<(String, String)>> = None;
    let mut answered = Vec::new();
    terms.retain_mut(|term| match term {
        Term::Listed {
            names,
            traces,
            answers,
        } if names.is_empty() => {
            answered.append(answers);
            let traces = std::mem::take(traces);
            merged = Some(match merged.take() {
                None => traces,
                Some(mut kept) => {
                    let other: HashSet<&(String, String)> = traces.iter().collect();
                    kept.retain(|key| other.contains(key));
                    kept
                }
            });
            false
        }
        _ => true,
    });
    match merged {
        Some(traces) if traces.is_empty() => false,
        Some(traces) => {
            terms.push(Term::Listed {
                names: Vec::new(),
                traces,
                answers: answered,
            });
            true
        }
        None => true,
    }
}

/// The distinct (run, trace) keys of rows that have `run_id` and `trace_id`, sorted.
pub(super) fn distinct_traces<R: DbRow>(rows: &[R]) -> StoreResult<Vec<(String, String)>> {
    let mut traces = rows
        .iter()
        .map(|r| Ok((r.req_text("run_id")?, r.req_text("trace_id")?)))
        .collect::<StoreResult<Vec<_>>>()?;
    traces.sort_unstable();
    traces.dedup();
    Ok(traces)
}

fn listed_limit() -> i64 {
    i64::try_from(MAX_LISTED + 1).unwrap_or(i64::MAX)
}

/// ` AND` the query's run or project. A run is either given as `run_id` itself or,
/// where the table has no run (`trace_names`), through its project: `by_run` is the
/// condition's start, closed here after the run id.
fn push_scope<'a, DB: Dialect>(q: &mut Sql<'a, DB>, query: &'a TraceQuery, by_run: &str) {
    if let Some(run_id) = &query.run_id {
        q.push(format!(" AND {by_run}")).bind(run_id).push(")");
    }
    if let Some(project) = &query.project {
        q.push(" AND project = ").bind(project);
    }
}

/// ` AND` the condition of each resolved term on `t`, the traces table, except the
/// driver's (see [`driver`]): its join already holds the list to those traces.
pub(super) fn push_terms<'a, DB: Dialect>(q: &mut Sql<'a, DB>, terms: &'a [Term<'a>]) {
    let like = DB::LIKE_ANY_CASE;
    let driver = driver(terms);
    for term in terms {
        if let (Term::Listed { traces, .. }, Some(d)) = (term, driver) {
            if std::ptr::eq(traces.as_slice(), d) {
                continue;
            }
        }
        if let Term::SpanCode(_) = term {
            continue;
        }
        q.push(" AND (");
        match term {
            Term::Pattern(term) => {
                let escaped = rows::escape_like(term);
                q.push(format!("t.name {like} "))
                    .bind(format!("%{escaped}%"))
                    .push(" ESCAPE '\\'");
                for column in ID_COLUMNS {
                    q.push(format!(" OR t.{column} {like} "))
                        .bind(format!("{escaped}%"))
                        .push(" ESCAPE '\\'");
                }
            }
            Term::Listed { names, traces, .. } => {
                if !names.is_empty() {
                    q.push("t.name IN (");
                    for (i, name) in names.iter().enumerate() {
                        q.push(if i == 0 { "" } else { ", " }).bind(name);
                    }
                    q.push(")");
                }
                if !traces.is_empty() {
                    q.push(if names.is_empty() { "" } else { " OR " });
                    q.push("(t.run_id, t.trace_id) IN (");
                    push_keys(q, traces);
                    q.push(")");
                }
            }
            Term::TextGathered(search) => {
                q.push("(t.run_id, t.trace_id) IN (");
                search.push_matching_traces(q);
                q.push(")");
            }
            // No condition: skipped above.
            Term::SpanCode(_) => {}
            Term::TextCommon(search) => {
                q.push("EXISTS (SELECT 1 ");
                DB::push_trace_docs_matching(q, search, TraceKey::Of("t"));
                // A trace at a time: a page fills within a few hundred (see
                // `Reader::text_traces`), where a join gathered every match first.
                q.push(DB::PER_ROW).push(")");
            }
        }
        q.push(")");
    }
}

/// The traces of the term that lists them by id alone (there is one at most, as
/// [`intersect_listed_traces`] leaves them): the list then starts from them (a few
/// key lookups) instead of walking an index of the scope and testing each trace,
/// which both databases' planners chose even for one key (0.5 s on a million traces).
fn driver<'a>(terms: &'a [Term<'a>]) -> Option<&'a [(String, String)]> {
    terms.iter().find_map(|term| match term {
        Term::Listed { names, traces, .. } if names.is_empty() => Some(traces.as_slice()),
        _ => None,
    })
}

/// Writes `(<the keys>) AS k CROSS JOIN ` when the list starts from a term's traces
/// (see [`driver`]), at the start of the FROM clause; nothing otherwise.
pub(super) fn push_driver<'a, DB: Dialect>(q: &mut Sql<'a, DB>, terms: &'a [Term<'a>]) {
    if let Some(traces) = driver(terms) {
        q.push("(");
        push_keys(q, traces);
        q.push(") AS k CROSS JOIN ");
    }
}

/// The rows `(run_id, trace_id)` of `traces`: on PostgreSQL two arrays, so that
/// the statement's text (and its cached plan) is the same however many there are.
/// As thousands of `VALUES` parameters, each list was parsed and planned anew.
fn push_keys<'a, DB: Dialect>(q: &mut Sql<'a, DB>, traces: &'a [(String, String)]) {
    push_rows(q, traces, |(run_id, trace_id)| {
        [run_id.into(), trace_id.into()]
    });
}

/// ` AND` the join of `alias` (a table with `run_id` and `trace_id`) to the driver's
/// rows, when there is one.
pub(super) fn push_driver_join<DB: Dialect>(q: &mut Sql<'_, DB>, terms: &[Term<'_>], alias: &str) {
    if driver(terms).is_some() {
        q.push(format!(
            " AND {alias}.run_id = k.column1 AND {alias}.trace_id = k.column2"
        ));
    }
}
