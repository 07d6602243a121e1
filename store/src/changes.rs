//! What changed between two step ranges: each range read in a few aggregate
//! queries (span names, error types, root numbers, root strings), compared here.

use std::collections::{BTreeSet, HashMap};

use treeline_wire::changes::{ChangeKind, ChangeRow, Changes, ChangesQuery, CHANGES_MAX};
use treeline_wire::filter::{Field, Op, SpanField, Test, TraceFilter, Value};

use super::dialect::{Dialect, JsonDoc, Sql};
use super::distribution::quantile;
use super::reader::Reader;
use super::rows::DbRow;
use super::search::{push_driver, Term};
use super::trace_list::push_conditions;
use super::{StoreResult, TraceQuery};

/// A string attribute with more values than this (an id) is not compared.
const MAX_STRING_VALUES: usize = 50;
/// Rows weaker than this are left out.
const MIN_STRENGTH: f64 = 0.02;
/// An attribute this correlated with the step follows it (a seed, a version).
const FOLLOWS_STEP: f64 = 0.98;

/// One span name's aggregates in one range.
#[derive(Clone, Copy, Default)]
struct NameStats {
    spans: f64,
    spans_sq: f64,
    failed: f64,
    origin: f64,
    dur: f64,
    dur_sq: f64,
    dur_n: f64,
    tokens: f64,
    tokens_sq: f64,
}

/// What one range holds.
#[derive(Default)]
struct Side {
    traces: f64,
    names: HashMap<(String, Option<String>), NameStats>,
    errors: HashMap<String, f64>,
    numbers: HashMap<String, Vec<(i64, f64)>>,
    strings: HashMap<String, HashMap<String, f64>>,
}

impl<DB: Dialect> Reader<DB> {
    pub(super) async fn changes(
        &self,
        query: &TraceQuery,
        changes: &ChangesQuery,
    ) -> StoreResult<Changes> {
        let mut answer = Changes {
            steps: changes.steps,
            baseline: changes.baseline,
            ..Changes::default()
        };
        let Some(terms) = self.resolve_terms(query).await? else {
            answer.empty = Some("no trace matches".into());
            return Ok(answer);
        };
        // Both ranges at once, on two connections.
        let (before, after) = futures::future::try_join(
            self.side(query, &terms, changes.baseline),
            self.side(query, &terms, changes.steps),
        )
        .await?;
        answer.traces = after.traces as i64;
        answer.baseline_traces = before.traces as i64;
        if before.traces == 0.0 || after.traces == 0.0 {
            let which = if after.traces == 0.0 {
                "the pinned steps"
            } else {
                "the baseline steps"
            };
            answer.empty = Some(format!("no matching trace in {which}"));
            return Ok(answer);
        }
        let (rows, follow) = compare(&before, &after);
        answer.rows = rows;
        answer.follow_step = follow;
        Ok(answer)
    }

    /// Reads one range's aggregates.
    async fn side<'q>(
        &self,
        query: &TraceQuery,
        terms: &'q [Term<'q>],
        (min, max): (i64, i64),
    ) -> StoreResult<Side> {
        let query = TraceQuery {
            min_step: Some(min),
            max_step: Some(max),
            ..query.clone()
        };
        let query = &query;
        let mut side = Side::default();

        let mut q = Sql::new("SELECT COUNT(*) AS n");
        from(&mut q, terms, "", "1 = 1");
        push_conditions(&mut q, query, terms);
        side.traces = self.count(q).await? as f64;
        if side.traces == 0.0 {
            return Ok(side);
        }

        let mut q = Sql::new(
            "SELECT x.name AS name, x.kind AS kind,
                    CAST(SUM(x.c) AS DOUBLE PRECISION) AS spans,
                    CAST(SUM(x.c * x.c) AS DOUBLE PRECISION) AS spans_sq,
                    CAST(SUM(x.failed) AS DOUBLE PRECISION) AS failed,
                    CAST(SUM(x.origin) AS DOUBLE PRECISION) AS origin,
                    CAST(SUM(x.d) AS DOUBLE PRECISION) AS dur,
                    CAST(SUM(x.d2) AS DOUBLE PRECISION) AS dur_sq,
                    CAST(SUM(x.dn) AS DOUBLE PRECISION) AS dur_n,
                    CAST(SUM(x.tok) AS DOUBLE PRECISION) AS tokens,
                    CAST(SUM(x.tok * x.tok) AS DOUBLE PRECISION) AS tokens_sq",
        );
        // Each trace's spans summed up by name, then the traces summed up.
        let per_name = format!(
            "{} AS name, s.kind AS kind, COUNT(*) AS c,
                    MAX(CASE WHEN s.status = 'error' THEN 1 ELSE 0 END) AS failed,
                    MAX(CASE WHEN s.status = 'error' AND s.error_count = 0 THEN 1 ELSE 0 END) AS origin,
                    SUM(s.end_us - s.start_us) AS d,
                    SUM(CAST(s.end_us - s.start_us AS DOUBLE PRECISION) * (s.end_us - s.start_us)) AS d2,
                    COUNT(s.end_us - s.start_us) AS dn,
                    CAST(COALESCE(SUM(s.token_count), 0) AS DOUBLE PRECISION) AS tok",
            numberless::<DB>("s.name")
        );
        let spans_of_t = "s.run_id = t.run_id AND s.trace_id = t.trace_id AND s.has_open";
        if DB::LATERAL {
            // A trace at a time: left to itself, PostgreSQL hashed every span of the
            // run against the range's traces and sorted the matches by trace (about
            // 420 ms a side on `bench rollouts`, against 180 through the spans' key).
            from(
                &mut q,
                terms,
                &format!(
                    " CROSS JOIN LATERAL (SELECT {per_name} FROM spans s WHERE {spans_of_t} \
                     GROUP BY 1, s.kind) x"
                ),
                "1 = 1",
            );
            push_conditions(&mut q, query, terms);
        } else {
            // SQLite reads each trace's spans through the key as it is.
            q.push(format!(" FROM (SELECT {per_name}"));
            from(&mut q, terms, " CROSS JOIN spans s", spans_of_t);
            push_conditions(&mut q, query, terms);
            q.push(" GROUP BY s.trace_id, 1, s.kind) x");
        }
        q.push(" GROUP BY x.name, x.kind");
        for r in self.rows(q).await? {
            let f = |c: &str| r.float(c).map(Option::unwrap_or_default);
            side.names.insert(
                (r.req_text("name")?, r.text("kind")?),
                NameStats {
                    spans: f("spans")?,
                    spans_sq: f("spans_sq")?,
                    failed: f("failed")?,
                    origin: f("origin")?,
                    dur: f("dur")?,
                    dur_sq: f("dur_sq")?,
                    dur_n: f("dur_n")?,
                    tokens: f("tokens")?,
                    tokens_sq: f("tokens_sq")?,
                },
            );
        }

        let mut q = Sql::new("SELECT ");
        DB::push_attr_text(&mut q, JsonDoc::SpanError, "type");
        q.push(" AS error_type, COUNT(DISTINCT t.trace_id) AS traces");
        from(
            &mut q,
            terms,
            " CROSS JOIN spans s",
            "s.run_id = t.run_id AND s.trace_id = t.trace_id",
        );
        q.push(" AND t.error_count > 0 AND s.status = 'error'");
        push_conditions(&mut q, query, terms);
        q.push(" GROUP BY 1");
        for r in self.rows(q).await? {
            if let Some(kind) = r.text("error_type")? {
                side.errors.insert(kind, r.req_int("traces")? as f64);
            }
        }

        let mut q = Sql::new("SELECT n.key AS key, t.step AS step, n.value AS v");
        // By trace: without statistics SQLite took the covering index by (run, key,
        // value) and read all of the run's numbers for each trace (94 s for 15,000
        // rows of the demo's GRPO run).
        let by_trace = DB::by_primary_key();
        from(
            &mut q,
            terms,
            &format!(" CROSS JOIN trace_numbers n{by_trace}"),
            "n.run_id = t.run_id AND n.trace_id = t.trace_id",
        );
        push_conditions(&mut q, query, terms);
        for r in self.rows(q).await? {
            side.numbers
                .entry(r.req_text("key")?)
                .or_default()
                .push((r.int("step")?.unwrap_or(min), r.req_float("v")?));
        }

        // Strings of at most 256 bytes, from `trace_texts`: a longer one is a prompt
        // or an id, not a value whose share moves.
        let mut q = Sql::new("SELECT a.key AS key, a.value AS text, COUNT(*) AS n");
        from(
            &mut q,
            terms,
            " CROSS JOIN trace_texts a",
            "a.run_id = t.run_id AND a.trace_id = t.trace_id",
        );
        push_conditions(&mut q, query, terms);
        q.push(" GROUP BY 1, 2");
        for r in self.rows(q).await? {
            if let Some(text) = r.text("text")? {
                side.strings
                    .entry(r.req_text("key")?)
                    .or_default()
                    .insert(text, r.req_int("n")? as f64);
            }
        }
        Ok(side)
    }
}

/// ` FROM` the traces (`t`), then `tables`, ` WHERE` `on`. `tables` come as
/// CROSS JOINs, which SQLite takes in the order written: the range's traces by the
/// step index first, then each one's rows by key.
fn from<'a, DB: Dialect>(q: &mut Sql<'a, DB>, terms: &'a [Term<'a>], tables: &str, on: &str) {
    q.push(" FROM ");
    push_driver(q, terms);
    q.push(format!("traces t{tables} WHERE {on}"));
}

/// `column` with every run of digits written `#`, so that `env.step t=3` and
/// `env.step t=14` are one name. Names without a digit skip the thirteen
/// replacements (a third of the query's time).
fn numberless<DB: Dialect>(column: &str) -> String {
    let mut e = column.to_string();
    for d in 0..=9 {
        e = format!("REPLACE({e}, '{d}', '#')");
    }
    // Runs of up to eight digits become one mark.
    for _ in 0..3 {
        e = format!("REPLACE({e}, '##', '#')");
    }
    format!(
        "CASE WHEN {} THEN {e} ELSE {column} END",
        DB::has_digit(column)
    )
}

/// The standard normal distribution function (Abramowitz and Stegun 7.1.26).
fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-z * z).exp();
    if x >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// A shift of `d` spreads as a strength from 0 to 1: how much more often than a coin
/// toss a value after is past a value before, were both normal.
fn shift_strength(d: f64) -> f64 {
    if d.is_infinite() {
        return 1.0;
    }
    (2.0 * normal_cdf(d.abs() / std::f64::consts::SQRT_2) - 1.0).clamp(0.0, 1.0)
}

/// A mean and its spread from a count, a sum and a sum of squares.
fn mean_sd(n: f64, sum: f64, sum_sq: f64) -> (f64, f64) {
    if n <= 0.0 {
        return (0.0, 0.0);
    }
    let mean = sum / n;
    (mean, (sum_sq / n - mean * mean).max(0.0).sqrt())
}

/// The difference of two means in units of their pooled spread.
fn standardized(before: (f64, f64), after: (f64, f64)) -> f64 {
    let diff = after.0 - before.0;
    let sd = ((before.1 * before.1 + after.1 * after.1) / 2.0).sqrt();
    match (diff == 0.0, sd > 0.0) {
        (true, _) => 0.0,
        (false, true) => diff / sd,
        (false, false) => diff.signum() * f64::INFINITY,
    }
}

fn filter(field: Field, test: Test) -> String {
    TraceFilter { field, test }.to_string()
}

fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

/// The span filter that finds a name's spans: the name itself, or, when numbers
/// were taken out of it, its kind.
fn span_filters(name: &str, kind: Option<&str>) -> Vec<String> {
    if !name.contains('#') {
        vec![filter(
            Field::Span(SpanField::Name),
            Test::Compare(Op::Eq, text(name)),
        )]
    } else if let Some(kind) = kind {
        vec![filter(
            Field::Span(SpanField::Kind),
            Test::Compare(Op::Eq, text(kind)),
        )]
    } else {
        Vec::new()
    }
}

/// Ties in strength go to the cause first: a failure that starts in the span, the
/// error types, failures passed up from a child, then sizes and attributes.
fn priority(row: &ChangeRow, origin: bool) -> u8 {
    match row.kind {
        ChangeKind::Failures if origin => 0,
        ChangeKind::ErrorType => 1,
        ChangeKind::Failures => 2,
        ChangeKind::Count => 3,
        ChangeKind::Duration => 4,
        ChangeKind::Tokens => 5,
        ChangeKind::Share => 6,
        ChangeKind::Number => 7,
    }
}

fn pearson(points: &[(i64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if n < 4.0 {
        return None;
    }
    let mx = points.iter().map(|p| p.0 as f64).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for &(x, y) in points {
        let (dx, dy) = (x as f64 - mx, y - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// The ranked rows, and the attributes left out because they follow the step.
fn compare(before: &Side, after: &Side) -> (Vec<ChangeRow>, Vec<String>) {
    let (n0, n1) = (before.traces, after.traces);
    let mut rows: Vec<(ChangeRow, bool)> = Vec::new();
    let mut push = |row: ChangeRow, origin: bool| {
        if row.strength >= MIN_STRENGTH {
            rows.push((row, origin));
        }
    };

    let names: BTreeSet<&(String, Option<String>)> =
        before.names.keys().chain(after.names.keys()).collect();
    for key in names {
        let (name, kind) = (&key.0, key.1.as_deref());
        let b = before.names.get(key).copied().unwrap_or_default();
        let a = after.names.get(key).copied().unwrap_or_default();
        let base = |change: ChangeKind, before: f64, after: f64, strength: f64| ChangeRow {
            kind: change,
            subject: name.clone(),
            span_kind: kind.map(str::to_string),
            before,
            after,
            strength,
            shift: None,
            filters: span_filters(name, kind),
        };
        let (p0, p1) = (b.failed / n0, a.failed / n1);
        if b.failed + a.failed > 0.0 && p0 != p1 {
            let mut row = base(ChangeKind::Failures, p0, p1, (p1 - p0).abs());
            if let Some(f) = row.filters.first().cloned() {
                let status = if p1 > p0 { "error" } else { "ok" };
                row.filters = vec![
                    f,
                    filter(
                        Field::Span(SpanField::Status),
                        Test::Compare(Op::Eq, text(status)),
                    ),
                ];
            }
            let failed = if p1 > p0 { a } else { b };
            push(row, failed.origin * 2.0 >= failed.failed);
        }
        let counts = (
            mean_sd(n0, b.spans, b.spans_sq),
            mean_sd(n1, a.spans, a.spans_sq),
        );
        if counts.0 .0 != counts.1 .0 {
            let d = standardized(counts.0, counts.1);
            push(
                base(
                    ChangeKind::Count,
                    counts.0 .0,
                    counts.1 .0,
                    shift_strength(d),
                ),
                false,
            );
        }
        if b.dur_n > 0.0 && a.dur_n > 0.0 {
            let durations = (
                mean_sd(b.dur_n, b.dur, b.dur_sq),
                mean_sd(a.dur_n, a.dur, a.dur_sq),
            );
            let d = standardized(durations.0, durations.1);
            push(
                base(
                    ChangeKind::Duration,
                    durations.0 .0,
                    durations.1 .0,
                    shift_strength(d),
                ),
                false,
            );
        }
        if b.tokens + a.tokens > 0.0 {
            let tokens = (
                mean_sd(n0, b.tokens, b.tokens_sq),
                mean_sd(n1, a.tokens, a.tokens_sq),
            );
            let d = standardized(tokens.0, tokens.1);
            push(
                base(
                    ChangeKind::Tokens,
                    tokens.0 .0,
                    tokens.1 .0,
                    shift_strength(d),
                ),
                false,
            );
        }
    }

    let types: BTreeSet<&String> = before.errors.keys().chain(after.errors.keys()).collect();
    for t in types {
        let p0 = before.errors.get(t).copied().unwrap_or_default() / n0;
        let p1 = after.errors.get(t).copied().unwrap_or_default() / n1;
        push(
            ChangeRow {
                kind: ChangeKind::ErrorType,
                subject: t.clone(),
                span_kind: None,
                before: p0,
                after: p1,
                strength: (p1 - p0).abs(),
                shift: None,
                filters: vec![filter(
                    Field::Span(SpanField::ErrorType),
                    Test::Compare(Op::Eq, text(t)),
                )],
            },
            false,
        );
    }

    let mut follow = Vec::new();
    let keys: BTreeSet<&String> = before.numbers.keys().chain(after.numbers.keys()).collect();
    for key in keys {
        let (Some(b), Some(a)) = (before.numbers.get(key), after.numbers.get(key)) else {
            continue;
        };
        let both: Vec<(i64, f64)> = b.iter().chain(a.iter()).copied().collect();
        if pearson(&both).is_some_and(|r| r.abs() >= FOLLOWS_STEP) {
            follow.push(format!("attr.{key}"));
            continue;
        }
        let sorted = |v: &[(i64, f64)]| {
            let mut v: Vec<f64> = v.iter().map(|p| p.1).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let (b, a) = (sorted(b), sorted(a));
        let (m0, m1) = (quantile(&b, 0.5), quantile(&a, 0.5));
        let n = b.len() as f64;
        let mean = b.iter().sum::<f64>() / n;
        let sd = (b.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt();
        let shift = match (m1 == m0, sd > 0.0) {
            (true, _) => 0.0,
            (false, true) => (m1 - m0) / sd,
            (false, false) => (m1 - m0).signum() * f64::INFINITY,
        };
        let op = if m1 < m0 { Op::Lt } else { Op::Gt };
        push(
            ChangeRow {
                kind: ChangeKind::Number,
                subject: format!("attr.{key}"),
                span_kind: None,
                before: m0,
                after: m1,
                strength: shift_strength(shift),
                // JSON has no infinity: a shift from no spread at all is left blank.
                shift: shift.is_finite().then_some(shift),
                filters: vec![filter(
                    Field::Attr(key.clone()),
                    Test::Compare(op, Value::Number(m0)),
                )],
            },
            false,
        );
    }

    let keys: BTreeSet<&String> = before.strings.keys().chain(after.strings.keys()).collect();
    for key in keys {
        let empty = HashMap::new();
        let b = before.strings.get(key).unwrap_or(&empty);
        let a = after.strings.get(key).unwrap_or(&empty);
        let values: BTreeSet<&String> = b.keys().chain(a.keys()).collect();
        if values.len() > MAX_STRING_VALUES {
            continue;
        }
        let best = values
            .into_iter()
            .map(|v| {
                let p0 = b.get(v).copied().unwrap_or_default() / n0;
                let p1 = a.get(v).copied().unwrap_or_default() / n1;
                (v, p0, p1)
            })
            .max_by(|x, y| (x.2 - x.1).abs().total_cmp(&(y.2 - y.1).abs()));
        if let Some((value, p0, p1)) = best {
            let test = Test::Compare(Op::Eq, text(value));
            push(
                ChangeRow {
                    kind: ChangeKind::Share,
                    subject: filter(Field::Attr(key.clone()), test.clone()),
                    span_kind: None,
                    before: p0,
                    after: p1,
                    strength: (p1 - p0).abs(),
                    shift: None,
                    filters: vec![filter(Field::Attr(key.clone()), test)],
                },
                false,
            );
        }
    }

    // Strengths within a tenth of each other rank cause first, then by strength: a
    // failure in 41 traces of 42 is no weaker a finding than the return it sinks.
    let rank = |(row, origin): &(ChangeRow, bool)| {
        (
            std::cmp::Reverse((row.strength * 10.0).round() as i64),
            priority(row, *origin),
        )
    };
    rows.sort_by(|x, y| {
        rank(x)
            .cmp(&rank(y))
            .then(y.0.strength.total_cmp(&x.0.strength))
            .then(x.0.subject.cmp(&y.0.subject))
    });
    let rows = rows.into_iter().take(CHANGES_MAX).map(|(row, _)| row);
    (rows.collect(), follow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strengths_grow_with_the_shift() {
        assert!(shift_strength(0.0) < 1e-6);
        assert!(shift_strength(0.5) < shift_strength(1.0));
        assert!(shift_strength(-3.0) > 0.9);
        assert_eq!(shift_strength(f64::INFINITY), 1.0);
        assert!((normal_cdf(1.96) - 0.975).abs() < 1e-3);
    }

    #[test]
    fn numbers_in_names_become_one_mark() {
        assert_eq!(
            numberless::<sqlx::Sqlite>("s.name")
                .matches("REPLACE")
                .count(),
            13,
            "ten digits, three merges"
        );
    }

    #[test]
    fn a_new_failure_ranks_before_its_symptoms() {
        let mut before = Side {
            traces: 10.0,
            ..Side::default()
        };
        let mut after = Side {
            traces: 10.0,
            ..Side::default()
        };
        let stats = |failed: f64, origin: f64| NameStats {
            spans: 10.0,
            spans_sq: 10.0,
            failed,
            origin,
            ..NameStats::default()
        };
        for (name, origin) in [("physics.integrate", 10.0), ("env.step t=#", 0.0)] {
            before.names.insert((name.into(), None), stats(0.0, 0.0));
            after.names.insert((name.into(), None), stats(10.0, origin));
        }
        after.errors.insert("FloatingPointError".into(), 10.0);
        before.numbers.insert(
            "ret".into(),
            (0..10)
                .map(|i| (i, 300.0 + f64::from(i as i32 % 3)))
                .collect(),
        );
        after.numbers.insert(
            "ret".into(),
            (10..20)
                .map(|i| (i, 100.0 + f64::from(i as i32 % 3)))
                .collect(),
        );
        let (rows, follow) = compare(&before, &after);
        let order: Vec<&str> = rows.iter().map(|r| r.subject.as_str()).collect();
        assert_eq!(
            order,
            [
                "physics.integrate",
                "FloatingPointError",
                "env.step t=#",
                "attr.ret"
            ]
        );
        assert!(follow.is_empty());
        assert_eq!(
            rows[0].filters,
            ["span.name = physics.integrate", "span.status = error"]
        );
    }
}
