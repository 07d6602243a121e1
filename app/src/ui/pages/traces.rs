//! `/traces`: filters on top; trace list, lazy span tree and span inspector below.
//! Every selection and filter lives in the URL, so a copied link reopens it.

use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_query_map};
use leptos_router::NavigateOptions;

use crate::ui::api::{self, encode, query_string};
use crate::ui::components::filters::Filters;
use crate::ui::components::inspector::Inspector;
use crate::ui::components::span_tree::{load_seed, SpanTree};
use crate::ui::components::trace_list::TraceList;

/// The workspace's state as the URL carries it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkspaceUrl {
    pub run_id: Option<String>,
    pub trace_id: Option<String>,
    pub span_id: Option<String>,
    pub project: Option<String>,
    pub status: Option<String>,
    pub kind: Option<String>,
    pub q: Option<String>,
}

impl WorkspaceUrl {
    pub fn from_query(map: &leptos_router::params::ParamsMap) -> Self {
        let get = |k: &str| map.get(k).filter(|v| !v.is_empty());
        WorkspaceUrl {
            run_id: get("run_id"),
            trace_id: get("trace_id"),
            span_id: get("span_id"),
            project: get("project"),
            status: get("status"),
            kind: get("kind"),
            q: get("q"),
        }
    }

    pub fn href(&self) -> String {
        let query = query_string(&[
            ("run_id", self.run_id.clone()),
            ("trace_id", self.trace_id.clone()),
            ("span_id", self.span_id.clone()),
            ("project", self.project.clone()),
            ("status", self.status.clone()),
            ("kind", self.kind.clone()),
            ("q", self.q.clone()),
        ]);
        if query.is_empty() {
            "/traces".into()
        } else {
            format!("/traces?{query}")
        }
    }

    /// The trace list's filters as an API query string.
    pub fn list_query(&self) -> String {
        let project = if self.run_id.is_none() {
            self.project.clone()
        } else {
            None
        };
        query_string(&[
            ("project", project),
            ("status", self.status.clone()),
            ("kind", self.kind.clone()),
            ("q", self.q.clone()),
        ])
    }

    pub fn with_selection(&self, run_id: &str, trace_id: &str, span_id: Option<&str>) -> Self {
        WorkspaceUrl {
            run_id: Some(run_id.to_string()),
            trace_id: Some(trace_id.to_string()),
            span_id: span_id.map(str::to_string),
            ..self.clone()
        }
    }
}

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
        |(run_id, q)| api::traces(run_id, format!("limit=50&{q}")),
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

    view! {
        <section class="workspace">
            <Filters url go_to list/>
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

/// A run-scoped link into the workspace.
pub fn link(run_id: &str, trace_id: &str, span_id: Option<&str>) -> String {
    let mut href = format!(
        "/traces?run_id={}&trace_id={}",
        encode(run_id),
        encode(trace_id)
    );
    if let Some(span) = span_id {
        href.push_str(&format!("&span_id={}", encode(span)));
    }
    href
}
