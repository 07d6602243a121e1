//! Aligning the children of two spans for a diff (docs/api.md §8.13). Spans are
//! matched by kind, then name, then position among the siblings of that kind and
//! name; a pair differs where its status, duration, counts, attributes or bodies'
//! fingerprints do. A span stored before fingerprints has its pair's bodies
//! compared as text by the database ([`add_body_differences`]).

// Keys are hashed once per child on each side: foldhash, seeded per map.
use foldhash::{HashMap, HashMapExt};

use treeline_wire::{AlignedRow, Change, SpanKind};

use crate::store::{BodyDifferences, ChildNode};

type Key<'a> = (SpanKind, &'a str, usize);

/// The bodies, in the order of [`ChildNode::bodies`].
const BODIES: [&str; 3] = ["input", "output", "error"];

/// Aligned rows, and which of them pair a span without body fingerprints.
pub struct Aligned {
    pub rows: Vec<AlignedRow>,
    /// The pairs whose bodies are still to be compared as text: each row's index
    /// and its (A, B) span ids.
    pub unsure: Vec<(usize, (String, String))>,
}

/// Each span's key: its kind, its name, and how many siblings of that kind and name
/// came before it.
fn keys(spans: &[ChildNode]) -> Vec<Key<'_>> {
    let mut seen: HashMap<(SpanKind, &str), usize> = HashMap::with_capacity(spans.len());
    spans
        .iter()
        .map(|s| {
            let n = seen.entry((s.node.kind, s.node.name.as_str())).or_default();
            let key = (s.node.kind, s.node.name.as_str(), *n);
            *n += 1;
            key
        })
        .collect()
}

/// Aligns `a` and `b`, each in sibling order. A's order leads; a span of B that
/// matches nothing comes in where it stood among B's matched spans.
pub fn align(a: Vec<ChildNode>, b: Vec<ChildNode>, threshold: f64) -> Aligned {
    let partner: Vec<Option<usize>> = {
        let mut position: HashMap<Key, usize> = HashMap::with_capacity(b.len());
        position.extend(keys(&b).into_iter().enumerate().map(|(j, key)| (key, j)));
        keys(&a).iter().map(|k| position.get(k).copied()).collect()
    };
    let mut matched = vec![false; b.len()];
    for j in partner.iter().flatten() {
        matched[*j] = true;
    }
    let mut b: Vec<Option<ChildNode>> = b.into_iter().map(Some).collect();
    let mut rows = Vec::with_capacity(a.len() + b.len());
    let mut unsure = Vec::new();
    let mut next_b = 0;
    for (a_span, partner) in a.into_iter().zip(partner) {
        let Some(j) = partner else {
            rows.push(one_side(Some(a_span), None));
            continue;
        };
        while next_b < j {
            if !matched[next_b] {
                if let Some(s) = b[next_b].take() {
                    rows.push(one_side(None, Some(s)));
                }
            }
            next_b += 1;
        }
        next_b = next_b.max(j + 1);
        if let Some(b_span) = b[j].take() {
            if !fingerprinted(&a_span, &b_span) {
                let ids = (a_span.node.span_id.clone(), b_span.node.span_id.clone());
                unsure.push((rows.len(), ids));
            }
            rows.push(pair(a_span, b_span, threshold));
        }
    }
    // Every matched span was taken by its pair: what is left matched nothing.
    rows.extend(b.into_iter().flatten().map(|s| one_side(None, Some(s))));
    Aligned { rows, unsure }
}

/// Whether both spans' bodies have fingerprints to compare.
fn fingerprinted(a: &ChildNode, b: &ChildNode) -> bool {
    a.bodies.iter().chain(&b.bodies).all(Option::is_some)
}

fn one_side(a: Option<ChildNode>, b: Option<ChildNode>) -> AlignedRow {
    AlignedRow {
        change: if a.is_some() {
            Change::OnlyA
        } else {
            Change::OnlyB
        },
        a: a.map(|s| s.node),
        b: b.map(|s| s.node),
        differences: Vec::new(),
    }
}

fn pair(a: ChildNode, b: ChildNode, threshold: f64) -> AlignedRow {
    let differences = differences(&a, &b, threshold);
    AlignedRow {
        change: if differences.is_empty() {
            Change::Same
        } else {
            Change::Changed
        },
        a: Some(a.node),
        b: Some(b.node),
        differences,
    }
}

/// What differs between two matched spans, in a fixed order. Bodies are named only
/// when both spans have fingerprints.
fn differences(a: &ChildNode, b: &ChildNode, threshold: f64) -> Vec<String> {
    let (x, y) = (&a.node, &b.node);
    let bodies = fingerprinted(a, b);
    [
        ("status", x.status != y.status),
        (
            "duration",
            duration_changed(x.duration_us, y.duration_us, threshold),
        ),
        ("tokens", x.token_count != y.token_count),
        ("children", x.child_count != y.child_count),
        ("errors", x.error_count != y.error_count),
        ("attributes", !a.same_attributes(b)),
    ]
    .into_iter()
    .chain(
        BODIES
            .into_iter()
            .zip(a.bodies.iter().zip(&b.bodies))
            .map(|(name, (p, q))| (name, bodies && p != q)),
    )
    .filter(|(_, differ)| *differ)
    .map(|(what, _)| what.to_string())
    .collect()
}

/// Marks the pairs whose bodies differ (`found` indexes into `at`, the rows of
/// [`Aligned::unsure`]) as changed, naming the bodies.
pub fn add_body_differences(rows: &mut [AlignedRow], at: &[usize], found: Vec<BodyDifferences>) {
    for (pair, flags) in found {
        let Some(row) = at.get(pair).and_then(|&i| rows.get_mut(i)) else {
            continue;
        };
        for (name, differs) in BODIES.into_iter().zip(flags) {
            if differs {
                row.differences.push(name.to_string());
            }
        }
        if !row.differences.is_empty() {
            row.change = Change::Changed;
        }
    }
}

/// Two durations differ when one is missing (still running) or they are further
/// apart than `threshold` times the longer.
fn duration_changed(a: Option<i64>, b: Option<i64>, threshold: f64) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            let (a, b) = (a.max(0) as f64, b.max(0) as f64);
            (a - b).abs() > threshold * a.max(b)
        }
        (None, None) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use serde_json::value::RawValue;
    use treeline_wire::{SpanNode, SpanStatus};

    use super::*;

    fn attributes(value: serde_json::Value) -> Box<RawValue> {
        RawValue::from_string(value.to_string()).expect("JSON")
    }

    fn span(id: &str, kind: SpanKind, name: &str, duration: i64) -> ChildNode {
        ChildNode {
            node: SpanNode {
                span_id: id.into(),
                parent_span_id: Some("p".into()),
                name: name.into(),
                kind,
                status: SpanStatus::Ok,
                start_us: 0,
                end_us: Some(duration),
                duration_us: Some(duration),
                step: None,
                rank: None,
                child_count: 0,
                error_count: 0,
                token_count: None,
                orphan: false,
                ordinal: 0,
            },
            attributes: attributes(json!({})),
            bodies: [Some(0); 3],
        }
    }

    fn turn(id: &str) -> ChildNode {
        let name = id.trim_end_matches(|c: char| c.is_ascii_digit());
        let kind = match name {
            "llm" => SpanKind::Model,
            _ => SpanKind::Tool,
        };
        span(id, kind, name, 100)
    }

    /// Each row as "a-id|b-id change".
    fn shape(aligned: &Aligned) -> Vec<String> {
        aligned
            .rows
            .iter()
            .map(|r| {
                let id =
                    |n: &Option<SpanNode>| n.as_ref().map_or("-".into(), |n| n.span_id.clone());
                format!("{}|{} {:?}", id(&r.a), id(&r.b), r.change)
            })
            .collect()
    }

    fn side(ids: &[&str]) -> Vec<ChildNode> {
        ids.iter().map(|id| turn(id)).collect()
    }

    #[test]
    fn equal_levels_pair_up_the_same() {
        let rows = align(
            side(&["llm1", "search1", "llm2"]),
            side(&["llm1", "search1", "llm2"]),
            0.2,
        );
        assert_eq!(
            shape(&rows),
            ["llm1|llm1 Same", "search1|search1 Same", "llm2|llm2 Same"]
        );
    }

    #[test]
    fn an_inserted_span_is_only_in_b_where_it_stood() {
        let rows = align(
            side(&["llm1", "llm2"]),
            side(&["llm1", "search1", "llm2"]),
            0.2,
        );
        assert_eq!(
            shape(&rows),
            ["llm1|llm1 Same", "-|search1 OnlyB", "llm2|llm2 Same"]
        );
    }

    #[test]
    fn a_removed_span_is_only_in_a() {
        let rows = align(
            side(&["llm1", "search1", "llm2"]),
            side(&["llm1", "llm2"]),
            0.2,
        );
        assert_eq!(
            shape(&rows),
            ["llm1|llm1 Same", "search1|- OnlyA", "llm2|llm2 Same"]
        );
    }

    #[test]
    fn reordered_siblings_still_pair_by_kind_and_name() {
        let rows = align(side(&["llm1", "search1"]), side(&["search1", "llm1"]), 0.2);
        assert_eq!(shape(&rows), ["llm1|llm1 Same", "search1|search1 Same"]);
    }

    #[test]
    fn repeated_names_pair_by_their_position_among_namesakes() {
        // Two model calls named alike on each side: first with first, second with
        // second, whatever stands between them.
        let a = vec![
            span("a1", SpanKind::Model, "llm", 100),
            span("a2", SpanKind::Model, "llm", 100),
        ];
        let b = vec![
            span("b1", SpanKind::Model, "llm", 100),
            span("bt", SpanKind::Tool, "search", 5),
            span("b2", SpanKind::Model, "llm", 100),
            span("b3", SpanKind::Model, "llm", 100),
        ];
        let rows = align(a, b, 0.2);
        assert_eq!(
            shape(&rows),
            ["a1|b1 Same", "-|bt OnlyB", "a2|b2 Same", "-|b3 OnlyB"]
        );
        // A tool and a model call of one name are different spans.
        let rows = align(
            vec![span("x", SpanKind::Tool, "llm", 1)],
            side(&["llm1"]),
            0.2,
        );
        assert_eq!(shape(&rows), ["x|- OnlyA", "-|llm1 OnlyB"]);
    }

    #[test]
    fn a_pair_says_what_changed() {
        let a = span("a", SpanKind::Model, "llm", 100);
        let mut b = span("b", SpanKind::Model, "llm", 115);
        assert!(
            differences(&a, &b, 0.2).is_empty(),
            "15% apart is within 20%"
        );
        b.node.duration_us = Some(200);
        b.node.status = SpanStatus::Error;
        b.attributes = attributes(json!({"temperature": 0.7}));
        assert_eq!(
            differences(&a, &b, 0.2),
            ["status", "duration", "attributes"]
        );
        b.node.duration_us = None;
        assert!(
            differences(&a, &b, 10.0).contains(&"duration".to_string()),
            "running vs done"
        );
        let mut c = span("c", SpanKind::Model, "llm", 100);
        let mut d = span("d", SpanKind::Model, "llm", 100);
        c.attributes = attributes(json!({"x": 1, "y": 2}));
        d.attributes = attributes(json!({"y": 2, "x": 1}));
        assert!(
            differences(&c, &d, 0.2).is_empty(),
            "attribute order is no difference"
        );
    }

    #[test]
    fn bodies_differ_by_their_fingerprints() {
        let a = span("a", SpanKind::Model, "llm", 100);
        let mut b = span("b", SpanKind::Model, "llm", 100);
        b.bodies = [Some(0), Some(7), Some(0)];
        assert_eq!(differences(&a, &b, 0.2), ["output"]);
        b.bodies = [Some(0), Some(0), Some(9)];
        assert_eq!(differences(&a, &b, 0.2), ["error"]);
    }

    #[test]
    fn bodies_without_fingerprints_are_left_to_the_text_comparison() {
        // llm2 on A was stored before fingerprints: its pair is unsure, and its
        // bodies are named only once the database has compared their text.
        let mut a = side(&["llm1", "search1", "llm2"]);
        a[2].bodies = [None; 3];
        let b = side(&["llm1", "llm2"]);
        let mut aligned = align(a, b, 0.2);
        assert_eq!(
            aligned.unsure,
            [(2, ("llm2".to_string(), "llm2".to_string()))]
        );
        assert_eq!(
            shape(&aligned),
            ["llm1|llm1 Same", "search1|- OnlyA", "llm2|llm2 Same"]
        );
        // The database found the unsure pair's output and error differ.
        add_body_differences(
            &mut aligned.rows,
            &[2],
            vec![(0, [false, true, true]), (9, [true; 3])],
        );
        assert_eq!(
            shape(&aligned),
            ["llm1|llm1 Same", "search1|- OnlyA", "llm2|llm2 Changed"]
        );
        assert_eq!(aligned.rows[2].differences, ["output", "error"]);
    }
}
