use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::ui::api;
use crate::wire::RunSummary;

/// `/`: every run, newest first, narrowed by a name filter as you type.
#[component]
pub fn RunsPage() -> impl IntoView {
    let query = use_query_map();
    let project = move || query.read().get("project");
    let runs = Resource::new(project, api::list_runs);
    let filter = RwSignal::new(String::new());

    view! {
        <section class="page runs">
            <div class="page-head">
                <h1>"Runs"</h1>
                <label class="filter">
                    "Filter runs "
                    <input
                        type="search"
                        placeholder="name or project"
                        prop:value=move || filter.get()
                        on:input=move |ev| filter.set(event_target_value(&ev))
                    />
                </label>
            </div>
            <Suspense fallback=|| view! { <p class="loading">"Loading runs…"</p> }>
                {move || Suspend::new(async move {
                    match runs.await {
                        Err(e) => view! {
                            <p class="error" role="alert">"Could not load runs: " {e.message}</p>
                        }.into_any(),
                        Ok(list) if list.runs.is_empty() => view! {
                            <p class="empty">
                                "No runs yet. Send one with the Python SDK or "
                                <code>"PUT /api/runs/{run_id}"</code>"."
                            </p>
                        }.into_any(),
                        Ok(list) => {
                            let rows = list.runs;
                            view! { <RunTable rows filter/> }.into_any()
                        }
                    }
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn RunTable(rows: Vec<RunSummary>, filter: RwSignal<String>) -> impl IntoView {
    let total = rows.len();
    let rows = StoredValue::new(rows);
    let visible = move || {
        let needle = filter.get().to_lowercase();
        rows.get_value()
            .into_iter()
            .filter(|r| {
                needle.is_empty()
                    || r.name.to_lowercase().contains(&needle)
                    || r.project.to_lowercase().contains(&needle)
            })
            .collect::<Vec<_>>()
    };
    view! {
        <p class="count">{move || format!("{} of {total} runs", visible().len())}</p>
        <table class="run-table">
            <thead>
                <tr>
                    <th>"Run"</th><th>"Project"</th><th>"Status"</th>
                    <th>"Traces"</th><th>"Failed traces"</th>
                </tr>
            </thead>
            <tbody>
                <For each=visible key=|r| r.run_id.clone() let:run>
                    <tr>
                        <td>{run.name.clone()}</td>
                        <td>{run.project.clone()}</td>
                        <td><span class=format!("badge {}", run.status)>{run.status.to_string()}</span></td>
                        <td class="num">{run.trace_count}</td>
                        <td class="num">{run.error_trace_count}</td>
                    </tr>
                </For>
            </tbody>
        </table>
    }
}
