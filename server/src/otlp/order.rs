//! Exporters send a batch in the order spans ended, children before their parents.
//! The store resolves what a child inherits (its step) when the child's open is
//! applied, so within one export parents are applied first. Siblings are numbered
//! in the order they are applied, so within one export they go by start time.

use std::collections::HashMap;

use treeline_wire::SpanEvent;

/// A span's open and close, with their indexes in the request.
pub type Pair = [(usize, SpanEvent); 2];

/// Orders `pairs` so that every span follows its parent when the parent is in the
/// same list, and spans of one depth go by start time; otherwise the order is kept. Linear, and safe against parent cycles.
pub fn parents_first(pairs: Vec<Pair>) -> Vec<Pair> {
    let key = |pair: &Pair| {
        (
            pair[0].1.trace_id().to_string(),
            pair[0].1.span_id().to_string(),
        )
    };
    let position: HashMap<(String, String), usize> = pairs
        .iter()
        .enumerate()
        .map(|(i, pair)| (key(pair), i))
        .collect();
    let parent: Vec<Option<usize>> = pairs
        .iter()
        .map(|pair| match &pair[0].1 {
            SpanEvent::Open(open) => open
                .parent_span_id
                .as_ref()
                .and_then(|p| position.get(&(open.trace_id.clone(), p.clone())).copied()),
            SpanEvent::Close(_) => None,
        })
        .collect();
    let mut depth: Vec<Option<usize>> = vec![None; pairs.len()];
    for start in 0..pairs.len() {
        let mut path = Vec::new();
        let mut at = start;
        let base = loop {
            if let Some(d) = depth[at] {
                break d;
            }
            if path.len() > pairs.len() {
                break 0; // a cycle: no order to honour
            }
            path.push(at);
            match parent[at] {
                Some(p) => at = p,
                None => break 0,
            }
        };
        let known = depth[at].is_some();
        for (i, node) in path.iter().rev().enumerate() {
            depth[*node] = Some(base + i + usize::from(known));
        }
    }
    let mut ordered: Vec<(usize, Pair)> = depth
        .into_iter()
        .map(|d| d.unwrap_or(0))
        .zip(pairs)
        .collect();
    let start = |pair: &Pair| match &pair[0].1 {
        SpanEvent::Open(open) => open.ts,
        SpanEvent::Close(_) => 0,
    };
    ordered.sort_by_key(|(d, pair)| (*d, start(pair)));
    ordered.into_iter().map(|(_, pair)| pair).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use treeline_wire::parse_event;

    fn pair(index: usize, span: &str, parent: Option<&str>) -> Pair {
        let event = |value| parse_event(&value).map(|(e, _)| e).expect("valid");
        [
            (
                2 * index,
                event(json!({"op": "open", "trace_id": "t", "span_id": span,
                    "parent_span_id": parent, "name": span, "kind": "custom", "ts": 1})),
            ),
            (
                2 * index + 1,
                event(
                    json!({"op": "close", "trace_id": "t", "span_id": span, "ts": 2, "status": "ok"}),
                ),
            ),
        ]
    }

    fn ids(pairs: &[Pair]) -> Vec<&str> {
        pairs.iter().map(|p| p[0].1.span_id()).collect()
    }

    #[test]
    fn parents_come_before_their_children() {
        let pairs = vec![
            pair(0, "grandchild", Some("child")),
            pair(1, "child", Some("root")),
            pair(2, "other", Some("missing")),
            pair(3, "root", None),
            pair(4, "sibling", Some("root")),
        ];
        let ordered = parents_first(pairs);
        assert_eq!(
            ids(&ordered),
            ["other", "root", "child", "sibling", "grandchild"]
        );
        assert_eq!(ordered[1][0].0, 6, "indexes travel with their events");
    }

    #[test]
    fn a_parent_cycle_does_not_hang() {
        let ordered = parents_first(vec![pair(0, "a", Some("b")), pair(1, "b", Some("a"))]);
        assert_eq!(ordered.len(), 2);
    }
}
