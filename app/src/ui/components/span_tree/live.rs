//! A running trace, read again every few seconds while it is open.

use leptos::prelude::*;
use treeline_wire::{SpanStatus, TraceSummary};

use super::model::Tree;
use crate::ui::api;

/// How often an open running trace is read again.
const REFRESH_MS: u64 = 3_000;

/// While the trace runs, reads it again every few seconds: its summary and the
/// children of every open node, merged in place so the reader's selection, open
/// nodes and scroll position stay where they were. Stops once the trace has ended.
/// `refreshed` is bumped when the selected span changed, so the inspector rereads it.
pub(super) fn refresh_while_running(
    tree: RwSignal<Tree>,
    trace: RwSignal<TraceSummary>,
    selected: Memo<Option<String>>,
    refreshed: RwSignal<u32>,
) {
    Effect::new(move |_| {
        if trace.with_untracked(|t| t.status) != SpanStatus::Running {
            return;
        }
        let busy = StoredValue::new(false);
        let handle = set_interval_with_handle(
            move || {
                if busy.get_value() || trace.with_untracked(|t| t.status) != SpanStatus::Running {
                    return;
                }
                busy.set_value(true);
                leptos::task::spawn_local(async move {
                    refresh_once(tree, trace, selected, refreshed).await;
                    busy.set_value(false);
                });
            },
            std::time::Duration::from_millis(REFRESH_MS),
        );
        if let Ok(handle) = handle {
            on_cleanup(move || handle.clear());
        }
    });
}

async fn refresh_once(
    tree: RwSignal<Tree>,
    trace: RwSignal<TraceSummary>,
    selected: Memo<Option<String>>,
    refreshed: RwSignal<u32>,
) {
    let (run, trace_id) = trace.with_untracked(|t| (t.run_id.clone(), t.trace_id.clone()));
    let Ok(summary) = api::trace(run.clone(), trace_id.clone()).await else {
        return;
    };
    let chosen = selected.get_untracked();
    let before = chosen
        .as_ref()
        .and_then(|id| tree.with_untracked(|t| t.node(id).cloned()));
    let parents = tree.try_update(Tree::visible_parents).unwrap_or_default();
    for (parent, loaded) in parents {
        let limit = loaded.clamp(api::SPAN_PAGE, api::SPAN_PAGE_MAX);
        let arg = (!parent.is_empty()).then(|| parent.clone());
        if let Ok(page) = api::span_page(run.clone(), trace_id.clone(), arg, None, limit).await {
            tree.update(|t| t.refresh(&parent, page.spans, page.next_cursor));
        }
    }
    let after = chosen
        .as_ref()
        .and_then(|id| tree.with_untracked(|t| t.node(id).cloned()));
    if before != after {
        refreshed.update(|n| *n += 1);
    }
    trace.set(summary);
}
