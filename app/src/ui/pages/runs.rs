use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_query_map};
use leptos_router::NavigateOptions;

use crate::ui::api::{self, encode};
use crate::ui::components::early_input;
use crate::ui::components::status::RunBadge;
use crate::ui::format;
use treeline_wire::run_compare::COMPARE_RUNS_MAX;
use treeline_wire::RunSummary;

/// `/`: every run, newest first, by project, narrowed by a filter as you type.
#[component]
pub fn RunsPage() -> impl IntoView {
    let query = use_query_map();
    let project = move || query.read().get("project");
    let runs = Resource::new(project, api::runs);
    let projects = Resource::new(|| (), |_| api::projects());
    let filter = RwSignal::new(String::new());
    early_input::keep(r#"section.runs label.filter input"#, filter);
    // The runs ticked for a comparison, in the link (`pick=`) so a selection survives
    // a reload and "compare with…" on a run's page can start one.
    let picked = Memo::new(move |_| {
        let mut out: Vec<String> = Vec::new();
        for id in query.read().get_all("pick").unwrap_or_default() {
            if !id.is_empty() && !out.contains(&id) {
                out.push(id);
            }
        }
        out
    });
    let navigate = use_navigate();
    let set_picked = Callback::new(move |ids: Vec<String>| {
        let mut pairs: Vec<String> = project()
            .map(|p| format!("project={}", encode(&p)))
            .into_iter()
            .collect();
        pairs.extend(ids.iter().map(|id| format!("pick={}", encode(id))));
        navigate(
            &format!("/?{}", pairs.join("&")),
            NavigateOptions {
                scroll: false,
                replace: true,
                ..Default::default()
            },
        );
    });

    view! {
        <section class="page runs">
            <div class="page-head">
                <h1>"Runs"</h1>
                <Suspense fallback=|| ()>
                    {move || Suspend::new(async move {
                        let list = match projects.await {
                            Ok(p) => p.projects,
                            Err(e) => return view! {
                                <p class="error" role="alert">{format!("The projects could not be loaded: {}", e.message)}</p>
                            }.into_any(),
                        };
                        let current = project().unwrap_or_default();
                        view! {
                            <nav class="projects" aria-label="Projects">
                                <a href="/" class:active=current.is_empty()>"All projects"</a>
                                {list.into_iter().map(|p| {
                                    let active = p.name == current;
                                    view! {
                                        <a href=format!("/?project={}", encode(&p.name)) class:active=active>
                                            {p.name.clone()} <span class="count">{p.runs}</span>
                                        </a>
                                    }
                                }).collect_view()}
                            </nav>
                        }.into_any()
                    })}
                </Suspense>
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
                                "No runs yet. Start one from Python with "
                                <code>"tl.init(\"my-project\")"</code>
                                ", or PUT /api/runs/{run_id}."
                            </p>
                        }.into_any(),
                        Ok(list) => view! {
                            <CompareBar picked set_picked/>
                            <RunTable rows=list.runs filter picked set_picked/>
                        }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

/// How many runs are ticked, and the way to compare them.
#[component]
fn CompareBar(picked: Memo<Vec<String>>, set_picked: Callback<Vec<String>>) -> impl IntoView {
    let href = move || {
        let runs: Vec<String> = picked
            .read()
            .iter()
            .map(|id| format!("run={}", encode(id)))
            .collect();
        format!("/compare-runs?{}", runs.join("&"))
    };
    view! {
        <div class="compare-bar" role="status">
            {move || match picked.read().len() {
                0 => view! { <span class="muted">"Tick runs to compare their metrics and configs."</span> }.into_any(),
                1 => view! {
                    <span>"1 run ticked: tick another to compare."</span>
                    <button type="button" class="link" on:click=move |_| set_picked.run(Vec::new())>"Clear"</button>
                }.into_any(),
                n => view! {
                    <a class="button" href=href>{format!("Compare {n} runs")}</a>
                    <button type="button" class="link" on:click=move |_| set_picked.run(Vec::new())>"Clear"</button>
                    {(n >= COMPARE_RUNS_MAX).then(|| view! {
                        <span class="muted">{format!("(at most {COMPARE_RUNS_MAX})")}</span>
                    })}
                }.into_any(),
            }}
        </div>
    }
}

#[component]
fn RunTable(
    rows: Vec<RunSummary>,
    filter: RwSignal<String>,
    picked: Memo<Vec<String>>,
    set_picked: Callback<Vec<String>>,
) -> impl IntoView {
    let total = rows.len();
    let now = format::now_us();
    // What the filter matches, lower-cased once per run rather than per keystroke.
    let haystacks: Vec<String> = rows
        .iter()
        .map(|r| format::lowercase(&format!("{}\n{}\n{}", r.name, r.project, r.run_id)))
        .collect();
    let rows = StoredValue::new(rows.into_iter().zip(haystacks).collect::<Vec<_>>());
    let visible = move || {
        let needle = format::lowercase(&filter.get());
        rows.with_value(|rows| {
            rows.iter()
                .filter(|(_, haystack)| haystack.contains(&needle))
                .map(|(run, _)| run.clone())
                .collect::<Vec<_>>()
        })
    };
    view! {
        <p class="count">{move || format!("{} of {total} runs", visible().len())}</p>
        <table class="run-table">
            <thead>
                <tr>
                    <th><span class="visually-hidden">"Compare"</span></th>
                    <th>"Run"</th><th>"Project"</th><th>"Status"</th><th>"Started"</th>
                    <th>"Duration"</th><th class="num">"Traces"</th>
                    <th class="num" title="Traces whose root failed">"Failed"</th>
                    <th class="num" title="Traces whose root did not fail, with a failed span beneath it">"Failed beneath"</th>
                    <th><span class="visually-hidden">"Workspace"</span></th>
                </tr>
            </thead>
            <tbody>
                <For each=visible key=|r| (r.run_id.clone(), r.updated_us) let:run>
                    <tr>
                        <td class="pick">{pick_box(&run, picked, set_picked)}</td>
                        <td><a href=format!("/runs/{}", encode(&run.run_id))>{run.name.clone()}</a></td>
                        <td>{run.project.clone()}</td>
                        <td><RunBadge status=run.status/></td>
                        <td title=format::timestamp(run.start_us)>{format::relative(run.start_us, now)}</td>
                        <td>{run_span(&run, now)}</td>
                        <td class="num">{run.trace_count}</td>
                        <td class="num" class:bad={run.failed_trace_count > 0}>{run.failed_trace_count}</td>
                        <td class="num" class:warn={beneath(&run) > 0}>{beneath(&run)}</td>
                        <td><a class="subtle" href=format!("/traces?run_id={}", encode(&run.run_id))>"traces →"</a></td>
                    </tr>
                </For>
            </tbody>
        </table>
    }
}

/// The box that ticks `run` for a comparison (greyed once the most are ticked).
fn pick_box(
    run: &RunSummary,
    picked: Memo<Vec<String>>,
    set_picked: Callback<Vec<String>>,
) -> impl IntoView {
    let id = run.run_id.clone();
    let ticked = {
        let id = id.clone();
        move || picked.read().contains(&id)
    };
    let full = {
        let ticked = ticked.clone();
        move || !ticked() && picked.read().len() >= COMPARE_RUNS_MAX
    };
    let toggle = move |_| {
        let mut ids = picked.get_untracked();
        if let Some(at) = ids.iter().position(|p| *p == id) {
            ids.remove(at);
        } else if ids.len() < COMPARE_RUNS_MAX {
            ids.push(id.clone());
        }
        set_picked.run(ids);
    };
    view! {
        <input type="checkbox" aria-label=format!("Compare {}", run.name)
            prop:checked=ticked disabled=full on:change=toggle/>
    }
}

/// Traces with a failure beneath a root that did not fail.
fn beneath(run: &RunSummary) -> i64 {
    (run.error_trace_count - run.failed_trace_count).max(0)
}

/// How long the run has gone, or, for an OpenTelemetry daily run (which no exporter
/// ever ends), when it last heard from one.
fn run_span(run: &RunSummary, now: i64) -> String {
    if treeline_wire::daily_run_date(&run.project, &run.name).is_some() {
        return format!("last activity {}", format::relative(run.updated_us, now));
    }
    format::duration(run.end_us.unwrap_or(now) - run.start_us)
}
