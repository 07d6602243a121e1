//! Two spans' bodies and attributes compared (docs/api.md §8.15): text as a word or
//! line diff, a chat transcript as its `role: content` lines, other JSON as the paths
//! whose values differ.

use std::time::Duration;

use serde_json::{Map, Value};
use similar::{ChangeTag, TextDiff};
use treeline_wire::{BodyDiff, DiffPiece, DiffTag, JsonChange, SpanDetail, SpanDiff};

/// Bytes of each side's text that a diff reads; past it the text is cut.
const MAX_TEXT: usize = 256 * 1024;
/// JSON changes listed per body.
const MAX_CHANGES: usize = 1_000;
/// A diff that takes longer settles for a coarser answer.
const DEADLINE: Duration = Duration::from_millis(200);

pub fn diff_spans(a: &SpanDetail, b: &SpanDetail) -> SpanDiff {
    let mut attributes = Vec::new();
    let mut cut = false;
    json_changes(
        "$",
        &Value::Object(a.attributes.clone()),
        &Value::Object(b.attributes.clone()),
        &mut attributes,
        &mut cut,
    );
    let bodies = [
        ("input", &a.input, &b.input),
        ("output", &a.output, &b.output),
        ("error", &a.error, &b.error),
    ]
    .into_iter()
    .map(|(name, x, y)| body_diff(name, x.as_ref(), y.as_ref()))
    .collect();
    SpanDiff { attributes, bodies }
}

fn body_diff(name: &str, a: Option<&Value>, b: Option<&Value>) -> BodyDiff {
    let mut diff = BodyDiff {
        body: name.to_string(),
        same: a == b,
        mode: "text".into(),
        text: Vec::new(),
        changes: Vec::new(),
        cut: false,
    };
    if diff.same {
        return diff;
    }
    match (as_text(a), as_text(b)) {
        (Some(x), Some(y)) => {
            let (x, cut_x) = clip(&x);
            let (y, cut_y) = clip(&y);
            diff.cut = cut_x || cut_y;
            diff.text = text_diff(x, y);
        }
        _ => {
            diff.mode = "json".into();
            let null = Value::Null;
            json_changes(
                "$",
                a.unwrap_or(&null),
                b.unwrap_or(&null),
                &mut diff.changes,
                &mut diff.cut,
            );
        }
    }
    diff
}

/// A body read as text: a string, or a transcript (messages with a role and
/// content) as `role: content` paragraphs. Absent is empty text when the other side
/// is text. Other JSON is `None`.
fn as_text(value: Option<&Value>) -> Option<String> {
    match value {
        None | Some(Value::Null) => Some(String::new()),
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Object(o)) => match o.get("messages") {
            Some(Value::Array(list)) => transcript(list),
            _ => message(o).map(|m| m + "\n"),
        },
        Some(Value::Array(list)) => transcript(list),
        Some(_) => None,
    }
}

fn transcript(list: &[Value]) -> Option<String> {
    let mut text = String::new();
    for item in list {
        text.push_str(&message(item.as_object()?)?);
        text.push('\n');
    }
    (!list.is_empty()).then_some(text)
}

fn message(m: &Map<String, Value>) -> Option<String> {
    let role = m.get("role")?.as_str()?;
    let content = match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    };
    let calls = m
        .get("tool_calls")
        .map(|c| format!(" {c}"))
        .unwrap_or_default();
    Some(format!("{role}: {content}{calls}"))
}

fn clip(text: &str) -> (&str, bool) {
    if text.len() <= MAX_TEXT {
        return (text, false);
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// Words for one line of text (a final newline aside), lines for more; runs of one
/// tag joined.
fn text_diff(a: &str, b: &str) -> Vec<DiffPiece> {
    let mut config = TextDiff::configure();
    config.timeout(DEADLINE);
    let lines = |t: &str| t.trim_end_matches('\n').contains('\n');
    let diff = if lines(a) || lines(b) {
        config.diff_lines(a, b)
    } else {
        config.diff_words(a, b)
    };
    let mut pieces: Vec<DiffPiece> = Vec::new();
    for change in diff.iter_all_changes() {
        let tag = match change.tag() {
            ChangeTag::Equal => DiffTag::Equal,
            ChangeTag::Delete => DiffTag::Delete,
            ChangeTag::Insert => DiffTag::Insert,
        };
        match pieces.last_mut() {
            Some(last) if last.tag == tag => last.text.push_str(change.value()),
            _ => pieces.push(DiffPiece {
                tag,
                text: change.value().to_string(),
            }),
        }
    }
    pieces
}

/// The paths under `path` where `a` and `b` differ: objects by key, arrays by index,
/// anything else as a whole.
fn json_changes(path: &str, a: &Value, b: &Value, out: &mut Vec<JsonChange>, cut: &mut bool) {
    if a == b {
        return;
    }
    if out.len() >= MAX_CHANGES {
        *cut = true;
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (key, xv) in x {
                let at = format!("{path}.{key}");
                match y.get(key) {
                    Some(yv) => json_changes(&at, xv, yv, out, cut),
                    None => push(out, cut, at, Some(xv), None),
                }
            }
            for (key, yv) in y {
                if !x.contains_key(key) {
                    push(out, cut, format!("{path}.{key}"), None, Some(yv));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                let at = format!("{path}[{i}]");
                match (x.get(i), y.get(i)) {
                    (Some(xv), Some(yv)) => json_changes(&at, xv, yv, out, cut),
                    (xv, yv) => push(out, cut, at, xv, yv),
                }
            }
        }
        _ => push(out, cut, path.to_string(), Some(a), Some(b)),
    }
}

fn push(
    out: &mut Vec<JsonChange>,
    cut: &mut bool,
    path: String,
    a: Option<&Value>,
    b: Option<&Value>,
) {
    if out.len() >= MAX_CHANGES {
        *cut = true;
        return;
    }
    out.push(JsonChange {
        path,
        a: a.cloned(),
        b: b.cloned(),
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn joined(pieces: &[DiffPiece], tag: DiffTag) -> String {
        pieces
            .iter()
            .filter(|p| p.tag == tag)
            .map(|p| p.text.as_str())
            .collect()
    }

    #[test]
    fn a_line_of_text_differs_by_words() {
        let d = body_diff(
            "output",
            Some(&json!("the answer is 42")),
            Some(&json!("the answer is 41")),
        );
        assert_eq!(d.mode, "text");
        assert_eq!(joined(&d.text, DiffTag::Delete), "42");
        assert_eq!(joined(&d.text, DiffTag::Insert), "41");
        assert_eq!(joined(&d.text, DiffTag::Equal), "the answer is ");
    }

    #[test]
    fn transcripts_differ_by_their_messages() {
        let a = json!({"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]});
        let b = json!({"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "5"}]});
        let d = body_diff("input", Some(&a), Some(&b));
        assert_eq!(d.mode, "text");
        assert_eq!(joined(&d.text, DiffTag::Equal), "user: 2+2?\n");
        assert_eq!(joined(&d.text, DiffTag::Delete), "assistant: 4\n");
        assert_eq!(joined(&d.text, DiffTag::Insert), "assistant: 5\n");
    }

    #[test]
    fn other_json_differs_by_path() {
        let a = json!({"reward": 1.0, "steps": [1, 2], "done": true});
        let b = json!({"reward": 0.0, "steps": [1, 2, 3]});
        let d = body_diff("output", Some(&a), Some(&b));
        assert_eq!(d.mode, "json");
        let paths: Vec<&str> = d.changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["$.reward", "$.steps[2]", "$.done"]);
        assert_eq!(d.changes[1].a, None);
        assert_eq!(d.changes[2].b, None);
        assert!(body_diff("error", None, None).same);
    }

    #[test]
    fn huge_bodies_are_cut_not_refused() {
        let big = "x\n".repeat(MAX_TEXT);
        let d = body_diff("output", Some(&json!(big)), Some(&json!("x\n")));
        assert!(d.cut);
        assert!(!d.same);
    }
}
