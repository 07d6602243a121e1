//! Review mode's keys on the trace list: `j` and `k` select the next or previous
//! trace; with `review=NAME` in the URL, a digit writes NAME = digit on the selected
//! trace, as a person, and moves on. The selection is the URL's, so a review is a
//! link.

use leptos::ev;
use leptos::prelude::*;
use serde_json::json;
use treeline_wire::annotations::{NoteChip, MAX_CHIPS};
use treeline_wire::TraceSummary;

use crate::ui::api;
use crate::ui::components::annotations::typing;
use crate::ui::url::WorkspaceUrl;

/// Listens for the keys while the list is on screen; answers where a refused write
/// is said.
pub(super) fn keys(
    traces: RwSignal<Vec<TraceSummary>>,
    url: Memo<WorkspaceUrl>,
    go_to: Callback<WorkspaceUrl>,
) -> RwSignal<Option<String>> {
    let problem = RwSignal::new(None::<String>);
    // The selected row kept in view as the keys move it.
    Effect::watch(
        move || url.with(|u| u.trace_id.clone()),
        |_, _, _| {
            if let Ok(Some(row)) = document().query_selector(".trace-list a[aria-current=\"true\"]")
            {
                let options = web_sys::ScrollIntoViewOptions::new();
                options.set_block(web_sys::ScrollLogicalPosition::Nearest);
                row.scroll_into_view_with_scroll_into_view_options(&options);
            }
        },
        false,
    );
    let handle = window_event_listener(ev::keydown, move |e| {
        if e.ctrl_key() || e.meta_key() || e.alt_key() || typing(&e) {
            return;
        }
        let u = url.get_untracked();
        let key = e.key();
        let digit = key
            .parse::<u8>()
            .ok()
            .filter(|d| *d <= 9 && u.review.is_some());
        let step: isize = match key.as_str() {
            "j" => 1,
            "k" => -1,
            _ if digit.is_some() => 0,
            _ => return,
        };
        e.prevent_default();
        let list = traces.get_untracked();
        let here = list.iter().position(|t| {
            Some(&t.trace_id) == u.trace_id.as_ref()
                && u.run_id.as_ref().is_none_or(|r| *r == t.run_id)
        });
        let next = match (here, step) {
            (None, _) => Some(0),
            (Some(i), 0 | 1) => Some(i + 1),
            (Some(i), _) => i.checked_sub(1),
        }
        .filter(|i| *i < list.len());
        let chosen = here.map(|i| list[i].clone());
        let select = move |i: Option<usize>, u: &WorkspaceUrl| {
            if let Some(t) = i.and_then(|i| list.get(i)) {
                go_to.run(u.with_selection(&t.run_id, &t.trace_id, t.root_span_id.as_deref()));
            }
        };
        let (Some(d), Some(t), Some(name)) = (digit, chosen, u.review.clone()) else {
            if step != 0 {
                select(next, &u);
            }
            return;
        };
        leptos::task::spawn_local(async move {
            let body = json!({"name": name, "value": d, "source": "person"});
            let written = api::annotate(t.run_id.clone(), t.trace_id.clone(), body).await;
            match written {
                Ok(_) => {
                    problem.set(None);
                    refresh_chips(traces, &t).await;
                    select(next, &u);
                }
                Err(e) => problem.set(Some(e.message)),
            }
        });
    });
    on_cleanup(move || handle.remove());
    problem
}

/// Rereads a trace's annotations and redraws its chips as the server would.
async fn refresh_chips(traces: RwSignal<Vec<TraceSummary>>, t: &TraceSummary) {
    let Ok(list) = api::annotations(t.run_id.clone(), t.trace_id.clone()).await else {
        return;
    };
    let mut chips: Vec<NoteChip> = Vec::new();
    for a in list.annotations {
        match chips
            .iter_mut()
            .find(|c| c.name == a.name && c.value == a.value)
        {
            Some(c) => c.count += 1,
            None => chips.push(NoteChip {
                name: a.name,
                value: a.value,
                count: 1,
            }),
        }
    }
    chips.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
    chips.truncate(MAX_CHIPS);
    traces.update(|ts| {
        if let Some(row) = ts
            .iter_mut()
            .find(|r| r.trace_id == t.trace_id && r.run_id == t.run_id)
        {
            row.notes = chips;
        }
    });
}
