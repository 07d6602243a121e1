//! The write statements both databases share, written once over [`Dialect`]. Each
//! function pushes exactly one statement: SQLite's group commit strings several into
//! one execution, PostgreSQL runs them one by one.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use treeline_wire::{Body, MetricPoint, SpanKind};
use xxhash_rust::xxh3::xxh3_64;

use super::attribute_codes::BatchCodes;
use super::columns;
use super::dialect::{Arg, Dialect, Sql};
use super::rows;
use super::{IdempotencyRecord, StoreResult};
use crate::ingest::{Adoption, RunDelta, SpanWrite, StepDelta, TraceWrite};

/// `VALUES (…), (…)`: one row of arguments per item.
pub(super) fn push_values<'a, DB: Dialect, I: IntoIterator, const N: usize>(
    q: &mut Sql<'a, DB>,
    items: I,
    row: impl Fn(I::Item) -> [Arg<'a>; N],
) {
    q.push("VALUES ");
    let items = items.into_iter();
    let rows = items.size_hint().0;
    // About 8 bytes of text a placeholder, with its separator.
    q.reserve(
        rows.saturating_mul(N),
        rows.saturating_mul(N).saturating_mul(8),
    );
    for (i, item) in items.enumerate() {
        q.push(if i == 0 { "(" } else { ", (" });
        for (j, arg) in row(item).into_iter().enumerate() {
            if j > 0 {
                q.push(", ");
            }
            q.bind(arg);
        }
        q.push(")");
    }
}

/// The rows of a write, as a query's rows: `VALUES (…), (…)` on SQLite, and on
/// PostgreSQL `SELECT * FROM UNNEST($1, …) AS v(column1, …)`, one array a column,
/// whose columns are named as `VALUES` names them.
pub(super) fn push_rows<'a, DB: Dialect, I: IntoIterator, const N: usize>(
    q: &mut Sql<'a, DB>,
    items: I,
    row: impl Fn(I::Item) -> [Arg<'a>; N],
) {
    if !DB::ROWS_AS_ARRAYS {
        return push_values(q, items, row);
    }
    let rows: Vec<[Arg<'a>; N]> = items.into_iter().map(row).collect();
    match columns::transpose(rows) {
        Ok(columns) => {
            q.push("SELECT * FROM UNNEST(");
            for (j, column) in columns.into_iter().enumerate() {
                if j > 0 {
                    q.push(", ");
                }
                q.bind(Arg::Column(column));
            }
            q.push(") AS v(");
            let names: Vec<String> = (1..=N).map(|j| format!("column{j}")).collect();
            q.push(names.join(", ")).push(")");
        }
        Err(rows) => push_values(q, rows, |r| r),
    }
}

/// Upserts spans; a stored span's attribute and metric maps are merged, not
/// replaced, and a body it already has is kept unless a new one arrives.
/// Their attributes are written keyed by `codes` ([`crate::attribute_codes`]).
pub(super) fn span_upsert<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    run_id: &'a str,
    spans: &'a [SpanWrite],
    codes: &BatchCodes,
) -> StoreResult<()> {
    let attributes = codes.encode_all(spans)?;
    q.push(
        "INSERT INTO spans (run_id, trace_id, span_id, parent_span_id, tree_parent, name, kind, \
         status, start_us, end_us, step, rank, ordinal, thread_id, has_open, has_close, \
         child_count, error_count, token_count, attr_count, attributes, metrics, links, input_truncated, \
         output_truncated, input, output, error, input_hash, output_hash, error_hash, input_z, \
         output_z) ",
    );
    push_rows(q, spans.iter().zip(attributes), |(w, attributes)| {
        let s = &w.state;
        [
            run_id.into(),
            (&s.trace_id).into(),
            (&s.span_id).into(),
            (&s.parent_span_id).into(),
            (&s.tree_parent).into(),
            (&s.name).into(),
            s.kind.map(SpanKind::as_str).into(),
            s.status.as_str().into(),
            s.start_us.into(),
            s.end_us.into(),
            s.step.into(),
            s.rank.into(),
            s.ordinal.into(),
            (&s.thread_id).into(),
            s.has_open.into(),
            s.has_close.into(),
            s.child_count.into(),
            s.error_count.into(),
            s.token_count.into(),
            s.attr_count.into(),
            Arg::Owned(attributes),
            rows::object_json(&w.metrics).into(),
            rows::links_json(&w.links).into(),
            w.input.as_ref().is_some_and(|b| b.truncated).into(),
            w.output.as_ref().is_some_and(|b| b.truncated).into(),
            text_unless_packed(&w.input, &w.packed[0]).into(),
            text_unless_packed(&w.output, &w.packed[1]).into(),
            w.error.as_ref().map(|b| b.json.as_str()).into(),
            fingerprint(w.input.as_ref()).into(),
            fingerprint(w.output.as_ref()).into(),
            fingerprint(w.error.as_ref()).into(),
            w.packed[0].as_deref().into(),
            w.packed[1].as_deref().into(),
        ]
    });
    q.push(format!(
        " ON CONFLICT (run_id, trace_id, span_id) DO UPDATE SET \
         parent_span_id = excluded.parent_span_id, tree_parent = excluded.tree_parent, \
         name = excluded.name, kind = excluded.kind, status = excluded.status, \
         start_us = excluded.start_us, end_us = excluded.end_us, step = excluded.step, \
         rank = excluded.rank, ordinal = excluded.ordinal, thread_id = excluded.thread_id, has_open = excluded.has_open, \
         has_close = excluded.has_close, child_count = excluded.child_count, \
         error_count = excluded.error_count, token_count = excluded.token_count, \
         attr_count = excluded.attr_count, attributes = {}, metrics = {}, \
         links = CASE WHEN excluded.links = '[]' THEN spans.links ELSE excluded.links END, \
         input_truncated = CASE WHEN {no_input} THEN spans.input_truncated ELSE excluded.input_truncated END, \
         output_truncated = CASE WHEN {no_output} THEN spans.output_truncated ELSE excluded.output_truncated END, \
         input = CASE WHEN {no_input} THEN spans.input ELSE excluded.input END, \
         input_z = CASE WHEN {no_input} THEN spans.input_z ELSE excluded.input_z END, \
         output = CASE WHEN {no_output} THEN spans.output ELSE excluded.output END, \
         output_z = CASE WHEN {no_output} THEN spans.output_z ELSE excluded.output_z END, \
         error = COALESCE(excluded.error, spans.error), \
         input_hash = CASE WHEN {no_input} THEN spans.input_hash ELSE excluded.input_hash END, \
         output_hash = CASE WHEN {no_output} THEN spans.output_hash ELSE excluded.output_hash END, \
         error_hash = CASE WHEN excluded.error IS NULL THEN spans.error_hash ELSE excluded.error_hash END",
        DB::json_merge("spans.attributes", "excluded.attributes"),
        DB::json_merge("spans.metrics", "excluded.metrics"),
        no_input = "excluded.input IS NULL AND excluded.input_z IS NULL",
        no_output = "excluded.output IS NULL AND excluded.output_z IS NULL",
    ));
    Ok(())
}

/// A body's text, unless it is stored packed.
fn text_unless_packed<'a>(body: &'a Option<Body>, packed: &Option<Vec<u8>>) -> Option<&'a str> {
    match packed {
        Some(_) => None,
        None => body.as_ref().map(|b| b.json.as_str()),
    }
}

/// A body's fingerprint, which an alignment compares instead of its text: xxh3 of
/// the stored text, never 0, which stands for no body.
fn fingerprint(body: Option<&Body>) -> i64 {
    body.map_or(0, |b| {
        i64::from_ne_bytes(xxh3_64(b.json.as_bytes()).max(1).to_ne_bytes())
    })
}

/// Upserts trace summaries (the planner computed them whole); root attributes merge.
pub(super) fn trace_upsert<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    run_id: &'a str,
    project: &'a str,
    traces: &'a [TraceWrite],
) {
    q.push(
        "INSERT INTO traces (run_id, trace_id, project, root_span_id, name, kind, status, kinds, \
         span_count, error_count, child_tokens, root_tokens, iteration_count, step, rank, \
         thread_id, rollout_id, start_us, end_us, updated_us, bytes, attributes) ",
    );
    push_rows(q, traces, |w| {
        let t = &w.state;
        [
            run_id.into(),
            (&t.trace_id).into(),
            project.into(),
            (&t.root_span_id).into(),
            (&t.name).into(),
            t.kind.map(SpanKind::as_str).into(),
            t.status.as_str().into(),
            t.kinds.into(),
            t.span_count.into(),
            t.error_count.into(),
            t.child_tokens.into(),
            t.root_tokens.into(),
            t.iteration_count.into(),
            t.step.into(),
            t.rank.into(),
            (&t.thread_id).into(),
            (&t.rollout_id).into(),
            t.start_us.into(),
            t.end_us.into(),
            t.updated_us.into(),
            t.bytes.into(),
            rows::object_json(&w.attributes).into(),
        ]
    });
    q.push(format!(
        " ON CONFLICT (run_id, trace_id) DO UPDATE SET root_span_id = excluded.root_span_id, \
         name = excluded.name, kind = excluded.kind, status = excluded.status, \
         kinds = excluded.kinds, span_count = excluded.span_count, \
         error_count = excluded.error_count, child_tokens = excluded.child_tokens, \
         root_tokens = excluded.root_tokens, iteration_count = excluded.iteration_count, \
         step = excluded.step, rank = excluded.rank, thread_id = excluded.thread_id, \
         rollout_id = excluded.rollout_id, start_us = excluded.start_us, \
         end_us = excluded.end_us, updated_us = excluded.updated_us, bytes = excluded.bytes, \
         attributes = {}",
        DB::json_merge("traces.attributes", "excluded.attributes"),
    ));
}

/// Rows of `trace_numbers` or `trace_texts` per statement: six arguments each at
/// most, far under SQLite's bound on arguments.
pub(super) const NUMBER_CHUNK: usize = 1_000;

/// The longest string root attribute `trace_texts` keeps, in bytes: a split label
/// or a group key, not a prompt.
pub(super) const TEXT_MAX_BYTES: usize = 256;

/// What the root attributes of `traces` change in `trace_numbers` and
/// `trace_texts`: the (trace, key, value) rows of the numbers and of the short
/// strings, and the (trace, key) of a stored trace's other values, whose rows go
/// (the summary's attribute merge keeps the latest value either way). A trace new
/// to this batch has no rows yet: deleting them anyway cost PostgreSQL a quarter of
/// a batch's time with a dozen root attributes.
#[derive(Default)]
pub(super) struct ValueChanges<'a> {
    pub numbers: Vec<ValueRow<'a, f64>>,
    pub not_numbers: Vec<(&'a str, &'a str)>,
    pub texts: Vec<ValueRow<'a, &'a str>>,
    pub not_texts: Vec<(&'a str, &'a str)>,
}

/// A root attribute's row: its trace, key and value, and the trace's step.
#[derive(Clone, Copy)]
pub(super) struct ValueRow<'a, V> {
    pub trace_id: &'a str,
    pub key: &'a str,
    pub value: V,
    pub step: Option<i64>,
}

pub(super) fn trace_values(traces: &[TraceWrite]) -> ValueChanges<'_> {
    let mut c = ValueChanges::default();
    for w in traces {
        let trace = w.state.trace_id.as_str();
        let step = w.state.step;
        let row = |key, value| ValueRow {
            trace_id: trace,
            key,
            value,
            step,
        };
        for (key, value) in &w.attributes {
            let key = key.as_str();
            match value.as_f64() {
                Some(n) => c.numbers.push(row(key, n)),
                None if w.stored => c.not_numbers.push((trace, key)),
                None => {}
            }
            // No NUL: a PostgreSQL text cannot hold one.
            match value.as_str() {
                Some(text) if text.len() <= TEXT_MAX_BYTES && !text.contains('\0') => {
                    c.texts.push(ValueRow {
                        trace_id: trace,
                        key,
                        value: text,
                        step,
                    });
                }
                _ if w.stored => c.not_texts.push((trace, key)),
                _ => {}
            }
        }
    }
    c
}

/// Stores each key's latest number.
pub(super) fn trace_numbers_upsert<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    run_id: &'a str,
    project: &'a str,
    rows: &[ValueRow<'a, f64>],
) {
    q.push("INSERT INTO trace_numbers (run_id, trace_id, key, project, value, step) ");
    push_rows(q, rows.iter().copied(), |r| {
        [
            run_id.into(),
            r.trace_id.into(),
            r.key.into(),
            project.into(),
            r.value.into(),
            r.step.into(),
        ]
    });
    q.push(
        " ON CONFLICT (run_id, trace_id, key) DO UPDATE \
         SET value = excluded.value, step = excluded.step",
    );
}

/// Stores each key's latest short string.
pub(super) fn trace_texts_upsert<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    run_id: &'a str,
    rows: &[ValueRow<'a, &'a str>],
) {
    q.push("INSERT INTO trace_texts (run_id, trace_id, key, value, step) ");
    push_rows(q, rows.iter().copied(), |r| {
        [
            run_id.into(),
            r.trace_id.into(),
            r.key.into(),
            r.value.into(),
            r.step.into(),
        ]
    });
    q.push(
        " ON CONFLICT (run_id, trace_id, key) DO UPDATE \
         SET value = excluded.value, step = excluded.step",
    );
}

/// Drops the rows of `table` (`trace_numbers` or `trace_texts`) of keys whose latest
/// value is not of its kind (most never were: each is a key probe that finds
/// nothing).
pub(super) fn trace_values_delete<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    table: &'static str,
    run_id: &'a str,
    keys: &[(&'a str, &'a str)],
) {
    q.push(format!("DELETE FROM {table} WHERE run_id = "));
    q.bind(run_id).push(" AND (trace_id, key) IN (");
    push_rows(q, keys.iter().copied(), |(trace_id, key)| {
        [trace_id.into(), key.into()]
    });
    q.push(")");
}

/// The distinct trace names a plan writes, for `trace_names`.
pub(super) fn trace_names(traces: &[TraceWrite]) -> Vec<&str> {
    let names: BTreeSet<&str> = traces.iter().map(|w| w.state.name.as_str()).collect();
    names.into_iter().collect()
}

/// Records names for search; one already known is a key probe.
pub(super) fn trace_names_insert<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    project: &'a str,
    names: &[&'a str],
) {
    q.push("INSERT INTO trace_names (project, name) ");
    push_rows(q, names.iter().copied(), |name| {
        [project.into(), name.into()]
    });
    q.push(" ON CONFLICT DO NOTHING");
}

/// Hangs the orphans waiting for `a.parent` under it, now that it has arrived.
pub(super) fn adopt<'a, DB: Dialect>(q: &mut Sql<'a, DB>, run_id: &'a str, a: &'a Adoption) {
    q.push("UPDATE spans SET tree_parent = parent_span_id WHERE run_id = ");
    q.bind(run_id);
    q.push(" AND trace_id = ");
    q.bind(&a.trace_id);
    q.push(" AND tree_parent = '' AND parent_span_id = ");
    q.bind(&a.parent);
}

/// Gives `step` to the descendants of `parent` that have no step of their own.
pub(super) fn step_descent<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    run_id: &'a str,
    trace_id: &'a str,
    parent: &'a str,
    step: i64,
) {
    q.push("WITH RECURSIVE sub(span_id) AS (SELECT span_id FROM spans WHERE run_id = ");
    q.bind(run_id);
    q.push(" AND trace_id = ");
    q.bind(trace_id);
    q.push(" AND tree_parent = ");
    q.bind(parent);
    q.push(" AND step IS NULL UNION ALL SELECT s.span_id FROM ");
    DB::push_each_span(
        q,
        "sub",
        "s.span_id",
        run_id,
        trace_id,
        "s.tree_parent = sub.span_id AND s.step IS NULL",
    );
    q.push(") UPDATE spans SET step = ");
    q.bind(step);
    q.push(" WHERE run_id = ");
    q.bind(run_id);
    q.push(" AND trace_id = ");
    q.bind(trace_id);
    q.push(" AND span_id IN (SELECT span_id FROM sub)");
}

/// Adds to the per-step trace counts.
pub(super) fn step_activity<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    run_id: &'a str,
    steps: &'a BTreeMap<i64, StepDelta>,
) {
    q.push("INSERT INTO step_activity (run_id, step, traces, errored, running) ");
    push_rows(q, steps, |(step, d)| {
        [
            run_id.into(),
            (*step).into(),
            d.traces.into(),
            d.errored.into(),
            d.running.into(),
        ]
    });
    q.push(
        " ON CONFLICT (run_id, step) DO UPDATE SET \
         traces = step_activity.traces + excluded.traces, \
         errored = step_activity.errored + excluded.errored, \
         running = step_activity.running + excluded.running",
    );
}

/// Forgets steps whose last trace moved to another step.
pub(super) fn drop_empty_steps<'a, DB: Dialect>(q: &mut Sql<'a, DB>, run_id: &'a str) {
    q.push("DELETE FROM step_activity WHERE run_id = ");
    q.bind(run_id);
    q.push(" AND traces <= 0");
}

/// Adds a batch's changes to the run's counts.
pub(super) fn run_counts<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    run_id: &'a str,
    r: RunDelta,
    now: i64,
) {
    q.push("UPDATE runs SET trace_count = trace_count + ");
    q.bind(r.traces);
    q.push(", errored_count = errored_count + ");
    q.bind(r.errored);
    q.push(", failed_count = failed_count + ");
    q.bind(r.failed);
    q.push(", running_count = running_count + ");
    q.bind(r.running);
    q.push(", unstepped_count = unstepped_count + ");
    q.bind(r.unstepped);
    q.push(", bytes = bytes + ");
    q.bind(r.bytes);
    q.push(format!(", updated_us = {}(updated_us, ", DB::GREATEST));
    q.bind(now);
    q.push(") WHERE run_id = ");
    q.bind(run_id);
}

/// Keeps idempotency answers; a key already kept keeps its first answer.
pub(super) fn idempotency_insert<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    records: &'a [IdempotencyRecord],
    now: i64,
) {
    q.push("INSERT INTO idempotency (key, fingerprint, status, response, created_us, run_id) ");
    push_rows(q, records, |r| {
        [
            (&r.key).into(),
            (&r.fingerprint).into(),
            i64::from(r.status).into(),
            (&r.response).into(),
            now.into(),
            (&r.run_id).into(),
        ]
    });
    q.push(" ON CONFLICT (key) DO NOTHING");
}

/// Upserts metric points. `points` must not repeat a (key, step): PostgreSQL
/// refuses to update one row twice in a statement (see [`last_per_step`]).
pub(super) fn metrics_upsert<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    run_id: &'a str,
    points: &'a [&'a MetricPoint],
) {
    q.push("INSERT INTO metric_points (run_id, key, step, value, ts) ");
    push_rows(q, points, |p| {
        [
            run_id.into(),
            (&p.key).into(),
            p.step.into(),
            p.value.into(),
            p.ts.into(),
        ]
    });
    q.push(
        " ON CONFLICT (run_id, key, step) DO UPDATE SET value = excluded.value, ts = excluded.ts",
    );
}

/// The last point of each (key, step), in first-seen order: what applying the
/// points one by one leaves stored.
pub(super) fn last_per_step(points: &[MetricPoint]) -> Vec<&MetricPoint> {
    let mut at: HashMap<(&str, i64), usize> = HashMap::with_capacity(points.len());
    let mut kept: Vec<&MetricPoint> = Vec::with_capacity(points.len());
    for p in points {
        match at.get(&(p.key.as_str(), p.step)) {
            Some(&i) => kept[i] = p,
            None => {
                at.insert((p.key.as_str(), p.step), kept.len());
                kept.push(p);
            }
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(key: &str, step: i64, value: f64) -> MetricPoint {
        MetricPoint {
            key: key.into(),
            step,
            value,
            ts: None,
        }
    }

    #[test]
    fn a_repeated_key_and_step_keeps_the_last_value() {
        let points = [
            point("loss", 1, 3.0),
            point("acc", 1, 0.5),
            point("loss", 1, 2.0),
        ];
        let kept: Vec<(&str, i64, f64)> = last_per_step(&points)
            .into_iter()
            .map(|p| (p.key.as_str(), p.step, p.value))
            .collect();
        assert_eq!(kept, vec![("loss", 1, 2.0), ("acc", 1, 0.5)]);
    }
}
