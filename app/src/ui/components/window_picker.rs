//! The time window of a trace list: a relative window or a UTC range, kept in the
//! URL. Without one, a run's list covers the whole run, and a list across runs the
//! server's browsing window.

use leptos::prelude::*;

use crate::ui::format;
use crate::ui::url::{WorkspaceUrl, WINDOWS};

#[component]
pub fn WindowPicker(url: Memo<WorkspaceUrl>, go_to: Callback<WorkspaceUrl>) -> impl IntoView {
    let in_run = move || url.get().run_id.is_some();
    let choose = move |ev| {
        let key = event_target_value(&ev);
        let u = url.get_untracked();
        // A range starts as the last day, for the reader to adjust.
        let (from, to) = if key == "range" {
            let now = format::now_us();
            (
                Some(format::utc_minute(now - 86_400_000_000)),
                Some(format::utc_minute(now)),
            )
        } else {
            (None, None)
        };
        go_to.run(WorkspaceUrl {
            window: (!key.is_empty()).then_some(key),
            from,
            to,
            trace_id: None,
            span_id: None,
            ..u
        });
    };
    let set_bound = move |to_end: bool, value: String| {
        let u = url.get_untracked();
        let value = (!value.is_empty()).then_some(value);
        go_to.run(if to_end {
            WorkspaceUrl {
                to: value,
                trace_id: None,
                span_id: None,
                ..u
            }
        } else {
            WorkspaceUrl {
                from: value,
                trace_id: None,
                span_id: None,
                ..u
            }
        });
    };
    view! {
        <label title="traces by their last update">
            "Window"
            <select on:change=choose>
                <option value="" selected=move || url.get().window.is_none()>
                    {move || if in_run() { "Whole run" } else { "Default" }}
                </option>
                {WINDOWS.iter().map(|(key, label, _)| view! {
                    <option value=*key selected=move || url.get().window.as_deref() == Some(*key)>{*label}</option>
                }).collect_view()}
                <option value="range" selected=move || url.get().window.as_deref() == Some("range")>"From – to (UTC)"</option>
            </select>
        </label>
        <Show when=move || url.get().window.as_deref() == Some("range")>
            <label>
                "From (UTC)"
                <input type="datetime-local" prop:value=move || url.get().from.unwrap_or_default()
                    on:change=move |ev| set_bound(false, event_target_value(&ev))/>
            </label>
            <label>
                "To (UTC)"
                <input type="datetime-local" prop:value=move || url.get().to.unwrap_or_default()
                    on:change=move |ev| set_bound(true, event_target_value(&ev))/>
            </label>
        </Show>
    }
}
