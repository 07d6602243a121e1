//! `/traces`: filters on top; trace list, lazy span tree and span inspector below.
//! Every selection and filter lives in the URL, so a copied link reopens it.

use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_query_map};
use leptos_router::NavigateOptions;

use crate::ui::api;
use crate::ui::components::annotations::NotesWritten;
use crate::ui::components::filter_builder::FilterBar;
use crate::ui::components::filters::Filters;
use crate::ui::components::inspector::Inspector;
use crate::ui::components::span_tree::{load_seed, SpanTree};
use crate::ui::components::trace_list::TraceList;
use crate::ui::url::{WorkspaceUrl, LIST_PAGE};
use treeline_wire::query::ListQuery;

#[component]
pub fn TracesPage() -> impl IntoView {
    let query = use_query_map();
    let url = Memo::new(move |_| WorkspaceUrl::from_query(&query.read()));
    let navigate = use_navigate();
    let navigate = StoredValue::new(navigate);
    let go_to = Callback::new(move |next: WorkspaceUrl| {
        navigate.with_value(|n| {
            n(
                &next.href(),
                NavigateOptions {
                    scroll: false,
                    ..Default::default()
                },
            )
        })
    });

    let list_key = Memo::new(move |_| {
        let u = url.get();
        (u.run_id.clone(), u.list_query())
    });
    let list = Resource::new(
        move || list_key.get(),
        |(run_id, q)| async move {
            let query = ListQuery {
                limit: Some(LIST_PAGE),
                ..q?
            };
            api::traces(run_id, query).await
        },
    );
    let selection = Memo::new(move |_| {
        let u = url.get();
        (u.run_id.clone(), u.trace_id.clone(), u.span_id.clone())
    });
    let trace_key = Memo::new(move |_| {
        let (run, trace, _) = selection.get();
        run.zip(trace)
    });
    // The tree's first state, including the path to a deep-linked span: rendered on
    // the server, reused by hydration.
    let seed = Resource::new(
        move || trace_key.get(),
        move |key| {
            let span = selection.get_untracked().2;
            load_seed(key, span)
        },
    );
    // Bumped by the tree's live refresh when the selected span changed.
    let refreshed = RwSignal::new(0u32);
    let detail = Resource::new(
        move || (selection.get(), refreshed.get()),
        |((run, trace, span), _)| async move {
            match (run, trace, span) {
                (Some(r), Some(t), Some(s)) => Some(api::span(r, t, s).await),
                _ => None,
            }
        },
    );

    provide_context(NotesWritten(RwSignal::new(0)));
    view! {
        <section class="workspace">
            // The page's title for assistive technology; the top bar already shows where you are.
            <h1 class="visually-hidden">"Traces"</h1>
            <Filters url go_to list/>
            <FilterBar url go_to/>
            <div class="panes">
                <div class="pane list-pane">
                    <TraceList url list go_to/>
                </div>
                <div class="pane tree-pane">
                    <SpanTree url seed go_to refreshed/>
                </div>
                <aside class="pane inspector" aria-label="Span inspector">
                    <Inspector url detail/>
                </aside>
            </div>
        </section>
    }
}
