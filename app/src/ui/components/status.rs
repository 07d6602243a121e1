use leptos::prelude::*;

use treeline_wire::{RunStatus, SpanStatus};

/// A span or trace status, labelled as the dashboard words it.
#[component]
pub fn StatusBadge(status: SpanStatus) -> impl IntoView {
    view! { <span class=format!("badge status-{}", status.as_str())>{status.label()}</span> }
}

#[component]
pub fn RunBadge(status: RunStatus) -> impl IntoView {
    view! { <span class=format!("badge run-{}", status.as_str())>{status.as_str()}</span> }
}
