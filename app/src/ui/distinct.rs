//! What tells traces apart: the root attributes whose values differ between them
//! (reward, sample), so rows that share a name still read differently without the
//! reader pinning a column.

use serde_json::{Map, Value};
use treeline_wire::TraceSummary;

/// Attributes worth showing first when several differ: what a researcher compares.
const FIRST: [&str; 6] = ["reward", "score", "return", "sample", "seed", "task"];
/// A value longer than this is no label.
const MAX_VALUE_CHARS: usize = 32;

/// A root attribute's value as a label shows it; None for one that is no label (a
/// list, an object, long text).
pub fn label(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if s.chars().count() <= MAX_VALUE_CHARS => Some(s.clone()),
        Value::Number(n) => Some(match n.as_f64() {
            // Short, but a float stays one: 1.0 as the inspector shows it, not 1.
            Some(f) if n.is_f64() => {
                let text = crate::ui::components::chart::short(f);
                if text.contains(['.', 'e']) || !f.is_finite() {
                    text
                } else {
                    format!("{text}.0")
                }
            }
            _ => n.to_string(),
        }),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Up to `max` root attribute keys whose values differ between `attributes` (each a
/// trace's), that most of them have: the preferred names first, then the keys more
/// traces have, then by name. Internal `treeline.` keys are left out.
pub fn keys<'a>(
    attributes: impl Iterator<Item = &'a Map<String, Value>>,
    max: usize,
) -> Vec<String> {
    let mut seen: Vec<(String, Vec<String>, usize)> = Vec::new();
    let mut total = 0usize;
    for attrs in attributes {
        total += 1;
        for (key, value) in attrs {
            if key.starts_with("treeline.") {
                continue;
            }
            let Some(text) = label(value) else { continue };
            match seen.iter_mut().find(|(k, _, _)| k == key) {
                Some((_, values, count)) => {
                    *count += 1;
                    if values.len() < 2 && !values.contains(&text) {
                        values.push(text);
                    }
                }
                None => seen.push((key.clone(), vec![text], 1)),
            }
        }
    }
    let mut differing: Vec<(String, usize)> = seen
        .into_iter()
        .filter(|(_, values, count)| values.len() > 1 && count * 2 >= total)
        .map(|(key, _, count)| (key, count))
        .collect();
    let rank = |key: &str| {
        let lower = key.to_ascii_lowercase();
        FIRST
            .iter()
            .position(|word| lower.contains(word))
            .unwrap_or(FIRST.len())
    };
    differing.sort_by(|a, b| {
        rank(&a.0)
            .cmp(&rank(&b.0))
            .then(b.1.cmp(&a.1))
            .then(a.0.cmp(&b.0))
    });
    differing.into_iter().take(max).map(|(k, _)| k).collect()
}

/// [`keys`] over a list of traces.
pub fn trace_keys(traces: &[TraceSummary], max: usize) -> Vec<String> {
    keys(traces.iter().map(|t| &t.attributes), max)
}

/// `key value` pairs of `attributes` for `keys`, a dash for one it lacks:
/// `sample 2 · reward 1`.
pub fn caption(attributes: &Map<String, Value>, keys: &[String]) -> String {
    keys.iter()
        .map(|key| {
            let value = attributes.get(key).and_then(label);
            format!("{key} {}", value.as_deref().unwrap_or("—"))
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn the_keys_that_differ_come_first_by_what_a_researcher_compares() {
        let rows = [
            attrs(
                json!({"model": "m", "sample": 0, "reward": 1.0, "zeta": "a", "prompt": "x".repeat(40)}),
            ),
            attrs(
                json!({"model": "m", "sample": 1, "reward": 0.0, "zeta": "b", "prompt": "y".repeat(40)}),
            ),
            attrs(json!({"model": "m", "sample": 2, "reward": 0.5, "zeta": "c", "treeline.x": 1})),
        ];
        // The same model everywhere tells nothing; a long prompt is no label.
        assert_eq!(keys(rows.iter(), 3), ["reward", "sample", "zeta"]);
        assert_eq!(keys(rows.iter(), 1), ["reward"]);
        assert_eq!(
            caption(&rows[0], &["sample".into(), "reward".into(), "gone".into()]),
            "sample 0 · reward 1.0 · gone —"
        );
        assert!(
            keys(rows[..1].iter(), 3).is_empty(),
            "one trace differs from none"
        );
    }
}
