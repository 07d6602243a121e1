//! The `/compare` page's state, kept in its URL so a pasted link shows the same
//! comparison: which spans, which attribute ranks them, and in a diff, the open
//! levels and the selected pair.

use crate::ui::api::query_string;

/// Columns a comparison shows at most.
pub(crate) const MAX_COLUMNS: usize = 8;

/// A span as `TRACE_ID:SPAN_ID`.
pub(crate) type SpanRef = (String, String);

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct CompareUrl {
    pub run_id: Option<String>,
    /// The compared spans, in the order given.
    pub spans: Vec<SpanRef>,
    /// Or: the children of this span (the first eight), such as a GRPO group's samples.
    pub parent: Option<SpanRef>,
    /// Or: the root spans of this step's traces (the first eight).
    pub step: Option<i64>,
    /// The numeric attribute that marks the best and worst column.
    pub by: Option<String>,
    /// `desc` or `asc`: the columns ordered by `by`; as given otherwise.
    pub order: Option<String>,
    /// A diff of exactly two spans, aligned level by level.
    pub diff: bool,
    /// In a diff, the aligned pairs whose children are shown, as `A_SPAN:B_SPAN`.
    pub open: Vec<String>,
    /// In a diff, the pair whose bodies are compared, as `A_TRACE:A_SPAN:B_TRACE:B_SPAN`.
    pub pair: Option<String>,
}

pub(crate) fn span_ref(text: &str) -> Option<SpanRef> {
    let (trace, span) = text.split_once(':')?;
    (!trace.is_empty() && !span.is_empty()).then(|| (trace.to_string(), span.to_string()))
}

fn list(text: Option<String>) -> Vec<String> {
    text.unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

impl CompareUrl {
    pub(crate) fn from_query(map: &leptos_router::params::ParamsMap) -> Self {
        let get = |k: &str| map.get(k).filter(|v| !v.is_empty());
        CompareUrl {
            run_id: get("run_id"),
            spans: list(get("spans"))
                .iter()
                .filter_map(|s| span_ref(s))
                .take(MAX_COLUMNS)
                .collect(),
            parent: get("parent").as_deref().and_then(span_ref),
            step: get("step").and_then(|s| s.parse().ok()),
            by: get("by"),
            order: get("order"),
            diff: get("diff").is_some_and(|d| d == "1"),
            open: list(get("open")),
            pair: get("pair"),
        }
    }

    pub(crate) fn href(&self) -> String {
        let spans = (!self.spans.is_empty()).then(|| {
            self.spans
                .iter()
                .map(|(t, s)| format!("{t}:{s}"))
                .collect::<Vec<_>>()
                .join(",")
        });
        let query = query_string(&[
            ("run_id", self.run_id.clone()),
            ("spans", spans),
            (
                "parent",
                self.parent.as_ref().map(|(t, s)| format!("{t}:{s}")),
            ),
            ("step", self.step.map(|s| s.to_string())),
            ("by", self.by.clone()),
            ("order", self.order.clone()),
            ("diff", self.diff.then(|| "1".to_string())),
            ("open", (!self.open.is_empty()).then(|| self.open.join(","))),
            ("pair", self.pair.clone()),
        ]);
        format!("/compare?{query}")
    }

    /// A comparison of these spans (replacing a parent or step that named them).
    pub(crate) fn with_spans(&self, spans: Vec<SpanRef>) -> Self {
        CompareUrl {
            spans,
            parent: None,
            step: None,
            open: Vec::new(),
            pair: None,
            ..self.clone()
        }
    }

    /// The same comparison with the aligned pair `key` opened or closed.
    pub(crate) fn toggled(&self, key: &str) -> Self {
        let mut next = self.clone();
        if let Some(i) = next.open.iter().position(|k| k == key) {
            next.open.remove(i);
        } else {
            next.open.push(key.to_string());
        }
        next
    }
}

/// A link that compares `spans` of `run_id` side by side.
pub(crate) fn compare_link(run_id: &str, spans: &[SpanRef]) -> String {
    CompareUrl {
        run_id: Some(run_id.to_string()),
        spans: spans.iter().take(MAX_COLUMNS).cloned().collect(),
        ..Default::default()
    }
    .href()
}

/// A link that compares the children of a span.
pub(crate) fn children_link(run_id: &str, trace_id: &str, span_id: &str) -> String {
    CompareUrl {
        run_id: Some(run_id.to_string()),
        parent: Some((trace_id.to_string(), span_id.to_string())),
        ..Default::default()
    }
    .href()
}

/// A link that compares the traces of one step of a run.
pub(crate) fn step_link(run_id: &str, step: i64) -> String {
    CompareUrl {
        run_id: Some(run_id.to_string()),
        step: Some(step),
        ..Default::default()
    }
    .href()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::url::params_of;

    #[test]
    fn a_comparison_round_trips_through_its_link() {
        let url = CompareUrl {
            run_id: Some("r".into()),
            spans: vec![("t1".into(), "s1".into()), ("t2".into(), "s2".into())],
            by: Some("reward".into()),
            diff: true,
            open: vec!["a:b".into(), "c:d".into()],
            pair: Some("t1:a:t2:b".into()),
            ..Default::default()
        };
        let href = url.href();
        assert_eq!(
            href,
            "/compare?run_id=r&spans=t1%3As1%2Ct2%3As2&by=reward&diff=1&open=a%3Ab%2Cc%3Ad&pair=t1%3Aa%3At2%3Ab"
        );
        assert_eq!(CompareUrl::from_query(&params_of(&href)), url);
    }

    #[test]
    fn toggling_a_level_opens_then_closes_it() {
        let url = CompareUrl::default().toggled("a:b");
        assert_eq!(url.open, ["a:b"]);
        assert!(url.toggled("a:b").open.is_empty());
    }

    #[test]
    fn malformed_spans_are_left_out_and_at_most_eight_kept() {
        assert_eq!(span_ref("t:s"), Some(("t".into(), "s".into())));
        assert_eq!(span_ref("ts"), None);
        assert_eq!(span_ref(":s"), None);
        let many: Vec<String> = (0..12).map(|i| format!("t{i}:s{i}")).collect();
        let map = params_of(&format!("/compare?spans={},bad", many.join(",")));
        assert_eq!(CompareUrl::from_query(&map).spans.len(), MAX_COLUMNS);
    }
}
