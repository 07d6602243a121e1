//! The batch planner over a fake loader: what each batch plans on top of what the
//! earlier ones stored, without a database.

use std::collections::HashMap;
use std::convert::Infallible;

use serde_json::{json, Value};
use treeline_wire::{parse_event, SpanEvent, SpanStatus};

use super::plan::{plan_batch, Loader, Plan};
use super::state::{SpanState, TraceState};

/// What the earlier batches stored, as the store would hand it back.
#[derive(Default)]
struct Stored {
    spans: HashMap<(String, String), SpanState>,
    traces: HashMap<String, TraceState>,
    attributes: HashMap<(String, String), Vec<String>>,
}

impl Loader for Stored {
    type Error = Infallible;

    async fn load_spans(
        &mut self,
        keys: &[(String, String)],
    ) -> Result<Vec<SpanState>, Infallible> {
        Ok(keys
            .iter()
            .filter_map(|k| self.spans.get(k).cloned())
            .collect())
    }

    async fn load_traces(&mut self, ids: &[String]) -> Result<Vec<TraceState>, Infallible> {
        Ok(ids
            .iter()
            .filter_map(|t| self.traces.get(t).cloned())
            .collect())
    }

    async fn load_attribute_names(
        &mut self,
        trace: &str,
        span: &str,
    ) -> Result<Vec<String>, Infallible> {
        let key = (trace.to_string(), span.to_string());
        Ok(self.attributes.get(&key).cloned().unwrap_or_default())
    }
}

impl Stored {
    /// Plans `events` as one batch and keeps what it writes, as a commit would.
    async fn batch(&mut self, events: &[Value]) -> Plan {
        let parsed: Vec<(usize, SpanEvent)> = events
            .iter()
            .enumerate()
            .map(|(i, e)| (i, parse_event(e).unwrap_or_else(|e| panic!("{e:?}")).0))
            .collect();
        let Ok(plan) = plan_batch(self, parsed, 1_000).await;
        for write in &plan.spans {
            let key = (write.state.trace_id.clone(), write.state.span_id.clone());
            let names = self.attributes.entry(key.clone()).or_default();
            names.extend(write.attributes.keys().cloned());
            self.spans.insert(key, write.state.clone());
        }
        for adoption in &plan.adopt {
            for span in self.spans.values_mut() {
                if span.trace_id == adoption.trace_id
                    && span.parent_span_id.as_deref() == Some(adoption.parent.as_str())
                {
                    span.tree_parent = Some(adoption.parent.clone());
                }
            }
        }
        for write in &plan.traces {
            self.traces
                .insert(write.state.trace_id.clone(), write.state.clone());
        }
        plan
    }

    fn span(&self, trace: &str, span: &str) -> &SpanState {
        self.spans
            .get(&(trace.to_string(), span.to_string()))
            .unwrap_or_else(|| panic!("span {span} stored"))
    }
}

fn open(trace: &str, span: &str, parent: Option<&str>, extra: Value) -> Value {
    let mut e = json!({"op": "open", "trace_id": trace, "span_id": span, "parent_span_id": parent,
        "name": span, "kind": "tool", "ts": 10});
    if let (Some(e), Some(extra)) = (e.as_object_mut(), extra.as_object()) {
        e.extend(extra.clone());
    }
    e
}

fn close(trace: &str, span: &str, status: &str) -> Value {
    json!({"op": "close", "trace_id": trace, "span_id": span, "status": status, "ts": 20})
}

#[tokio::test]
async fn a_close_before_its_open_makes_one_span_whichever_batch_brings_each() {
    let mut store = Stored::default();
    let first = store.batch(&[close("t", "root", "error")]).await;
    assert_eq!(first.run.traces, 1);
    assert!(!store.span("t", "root").has_open && store.span("t", "root").has_close);
    let second = store.batch(&[open("t", "root", None, json!({}))]).await;
    let root = store.span("t", "root");
    assert!(root.has_open && root.has_close);
    assert_eq!(root.status, SpanStatus::Error, "the close's status stays");
    // Still one trace: the second batch adds none, and now counts its failed root.
    assert_eq!(second.run.traces, 0);
    assert_eq!(
        (second.run.failed, store.traces["t"].status),
        (1, SpanStatus::Error)
    );
    // The other order, in one batch.
    let mut store = Stored::default();
    let plan = store
        .batch(&[open("u", "root", None, json!({})), close("u", "root", "ok")])
        .await;
    assert_eq!(
        (plan.run.traces, plan.run.errored, plan.run.failed),
        (1, 0, 0)
    );
    assert_eq!(store.span("u", "root").status, SpanStatus::Ok);
}

#[tokio::test]
async fn children_that_came_first_are_adopted_and_take_their_parents_step() {
    let mut store = Stored::default();
    let first = store
        .batch(&[
            open("t", "kid", Some("root"), json!({})),
            close("t", "kid", "error"),
        ])
        .await;
    // A failure beneath a root not yet known: errored, not failed, and without a step.
    assert_eq!(
        (first.run.errored, first.run.failed, first.run.unstepped),
        (1, 0, 1)
    );
    assert_eq!(
        store.span("t", "kid").tree_parent.as_deref(),
        Some(""),
        "an orphan is listed at the top"
    );
    let plan = store
        .batch(&[
            open("t", "root", None, json!({"step": 7})),
            close("t", "root", "ok"),
        ])
        .await;
    assert_eq!(plan.adopt.len(), 1);
    assert_eq!(
        (plan.adopt[0].parent.as_str(), plan.adopt[0].step),
        ("root", Some(7))
    );
    assert_eq!(store.span("t", "kid").tree_parent.as_deref(), Some("root"));
    let root = store.span("t", "root");
    assert_eq!((root.child_count, root.error_count), (1, 1));
    // The trace was counted already: it moves from no step to step 7, errored still.
    assert_eq!(
        (plan.run.traces, plan.run.errored, plan.run.failed),
        (0, 0, 0)
    );
    assert_eq!(plan.run.unstepped, -1);
    assert_eq!(
        plan.steps.get(&7).map(|s| (s.traces, s.errored)),
        Some((1, 1))
    );
}

#[tokio::test]
async fn a_child_without_a_step_descends_from_its_parent() {
    let mut store = Stored::default();
    store
        .batch(&[
            open("t", "root", None, json!({"step": 3})),
            open("t", "kid", Some("root"), json!({})),
            open("t", "grandkid", Some("kid"), json!({})),
        ])
        .await;
    assert_eq!(store.span("t", "kid").step, Some(3));
    assert_eq!(store.span("t", "grandkid").step, Some(3));
    assert_eq!(store.traces["t"].step, Some(3));
}

#[tokio::test]
async fn a_repeated_open_or_close_is_ignored_with_a_warning_and_counts_once() {
    let mut store = Stored::default();
    let plan = store
        .batch(&[
            open("t", "root", None, json!({"name": "first"})),
            open("t", "root", None, json!({"name": "second"})),
            close("t", "root", "ok"),
            close("t", "root", "error"),
        ])
        .await;
    let root = store.span("t", "root");
    assert_eq!((root.name.as_str(), root.status), ("first", SpanStatus::Ok));
    let warned: Vec<usize> = plan.warnings.iter().map(|w| w.index).collect();
    assert_eq!(warned, [1, 3], "{:?}", plan.warnings);
    assert_eq!((plan.run.traces, plan.run.errored), (1, 0));
    // Sent again in a later batch (a retry): nothing changes, nothing more is counted.
    let again = store
        .batch(&[open("t", "root", None, json!({})), close("t", "root", "ok")])
        .await;
    assert_eq!(
        (again.run.traces, again.run.errored, again.warnings.len()),
        (0, 0, 2)
    );
    assert_eq!(store.traces["t"].span_count, 1);
}
