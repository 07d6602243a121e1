use leptos::prelude::*;

use crate::ui::client_data::ClientData;
use leptos_router::hooks::{use_navigate, use_params_map, use_query_map};
use leptos_router::NavigateOptions;

use crate::ui::api::{self, encode};
use crate::ui::compare_url::step_link;
use crate::ui::components::body::JsonTree;
use crate::ui::components::changes::WhatChanged;
use crate::ui::components::chart::LineChart;
use crate::ui::components::delete_run::DeleteRun;
use crate::ui::components::group_lens::GroupLens;
use crate::ui::components::heatmap::Rollouts;
use crate::ui::components::status::{RunBadge, StatusBadge};
use crate::ui::components::timeline::{self, Timeline};
use crate::ui::distinct;
use crate::ui::format;
use crate::ui::url::{link, WorkspaceUrl};
use treeline_wire::query::ListQuery;
use treeline_wire::{MetricSeries, RunDetail, TraceList, TraceSummary};

/// `/runs/{run_id}`: the run's header, config, metric charts and, on demand, its
/// traces on the step axis.
#[component]
pub fn RunDetailPage() -> impl IntoView {
    let params = use_params_map();
    let run_id = move || params.read().get("run_id").unwrap_or_default();
    let run = Resource::new(run_id, api::run);
    view! {
        <section class="page run-detail">
            <Suspense fallback=|| view! { <p class="loading">"Loading run…"</p> }>
                {move || Suspend::new(async move {
                    match run.await {
                        Ok(detail) => view! { <RunView detail/> }.into_any(),
                        Err(e) if e.code == "run_not_found" => view! {
                            <p class="error" role="alert">{e.message}". " <a href="/">"Back to all runs"</a></p>
                        }.into_any(),
                        Err(e) => view! { <p class="error" role="alert">"Could not load the run: " {e.message}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

/// Every metric's series, and the keys whose series could not be loaded (with why).
async fn all_series(run_id: String, keys: Vec<String>) -> (Vec<MetricSeries>, Vec<String>) {
    let mut out = Vec::with_capacity(keys.len());
    let mut failed = Vec::new();
    for key in keys {
        match api::metric(run_id.clone(), key.clone(), 400).await {
            Ok(series) => out.push(series),
            Err(e) => failed.push(format!("{key}: {}", e.message)),
        }
    }
    (out, failed)
}

#[component]
fn RunView(detail: RunDetail) -> impl IntoView {
    let s = detail.summary.clone();
    let now = format::now_us();
    // Charts are drawn in the browser only: server-rendered SVG charts tripped
    // hydration when a run had several of them.
    let mounted = RwSignal::new(false);
    Effect::new(move |_| mounted.set(true));
    let query = use_query_map();
    let starts_open = ["step", "traces", "from"]
        .iter()
        .any(|k| query.read_untracked().get(k).is_some());
    // The section is fetched in the browser only: a pinned step (?step=), or a range
    // for what-changed (?from=), opens it once the page has hydrated.
    let opened = RwSignal::new(false);
    Effect::new(move |_| {
        if starts_open {
            opened.set(true);
        }
    });
    let config_empty = detail.config.is_null();
    let delete = view! {
        <DeleteRun run_id=s.run_id.clone() name=s.name.clone() project=s.project.clone()/>
    };
    view! {
        <header class="run-head">
            <p class="crumbs"><a href="/">"Runs"</a>" / "<a href=format!("/?project={}", encode(&s.project))>{s.project.clone()}</a></p>
            <h1>{s.name.clone()} " " <RunBadge status=s.status/></h1>
            <dl class="facts">
                <dt>"Run id"</dt><dd><code>{s.run_id.clone()}</code></dd>
                <dt>"Started"</dt><dd title=format::timestamp(s.start_us)>{format::timestamp(s.start_us)}</dd>
                <dt>"Duration"</dt><dd>{format::duration(s.end_us.unwrap_or(now) - s.start_us)}</dd>
                <dt>"Traces"</dt><dd>{trace_counts(&s)}</dd>
                <dt>"Size"</dt><dd title=super::runs::SIZE_NOTE>{treeline_wire::human_bytes(s.size_bytes)}</dd>
            </dl>
            <a class="button" href=WorkspaceUrl { run_id: Some(s.run_id.clone()), ..Default::default() }.href()>"Open in the Traces workspace"</a>
            " "
            <a class="button secondary" title="Pick other runs of this project to compare with this one"
                href=format!("/?project={}&pick={}", encode(&s.project), encode(&s.run_id))>"Compare with…"</a>
        </header>
        <details class="config">
            <summary>"Config"</summary>
            {if config_empty {
                view! { <p class="muted">"This run has no config."</p> }.into_any()
            } else {
                view! { <JsonTree value=detail.config.clone() open=true/> }.into_any()
            }}
        </details>
        <section class="metrics">
            <h2>"Metrics"</h2>
            {
                let (run_id, keys) = (s.run_id.clone(), detail.metric_keys.clone());
                move || if mounted.get() {
                    view! { <MetricCharts run_id=run_id.clone() keys=keys.clone()/> }.into_any()
                } else {
                    view! { <p class="loading">"Loading charts…"</p> }.into_any()
                }
            }
        </section>
        <details class="traces-section" open=move || opened.get()
            on:toggle=move |ev| {
                let open = event_target::<leptos::web_sys::HtmlDetailsElement>(&ev).open();
                if open != opened.get_untracked() { opened.set(open); }
            }>
            <summary><h2>"Traces"</h2></summary>
            {move || opened.get().then(|| view! {
                <TracesPanel run_id=s.run_id.clone() metric_keys=detail.metric_keys.clone()/>
            })}
        </details>
        {delete}
    }
}

#[component]
fn MetricCharts(run_id: String, keys: Vec<String>) -> impl IntoView {
    let charts = ClientData::new(move || all_series(run_id.clone(), keys.clone()));
    move || {
        match charts.get() {
        None => view! { <p class="loading">"Loading charts…"</p> }.into_any(),
        Some((list, failed)) if list.is_empty() && failed.is_empty() => view! { <p class="muted">"No metrics logged yet."</p> }.into_any(),
        Some((list, failed)) => view! {
            {(!failed.is_empty()).then(|| view! {
                <div class="error" role="alert">
                    <p>{format!("{} of this run's metrics could not be loaded:", failed.len())}</p>
                    <ul>{failed.into_iter().map(|f| view! { <li>{f}</li> }).collect_view()}</ul>
                </div>
            })}
            <div class="chart-grid">
                {list.into_iter().map(|m| view! { <LineChart label=m.key points=m.points/> }).collect_view()}
            </div>
        }.into_any(),
    }
    }
}

#[component]
fn TracesPanel(run_id: String, metric_keys: Vec<String>) -> impl IntoView {
    let compare_run = run_id.clone();
    let query = use_query_map();
    let pinned =
        Signal::derive(move || query.read().get("step").and_then(|s| s.parse::<i64>().ok()));
    // The range what-changed compares (`?from=&to=`), set by a drag on the timeline.
    let range = Signal::derive(move || {
        let q = query.read();
        let step = |k: &str| q.get(k).and_then(|s| s.parse::<i64>().ok());
        match (step("from"), step("to")) {
            (Some(a), Some(b)) if 0 <= a && a <= b => Some((a, b)),
            _ => None,
        }
    });
    // Each choice here (a step, a range, none) changes the page's query alone, and the
    // page stays where it is scrolled.
    let go = {
        let (navigate, base) = (use_navigate(), format!("/runs/{}", encode(&run_id)));
        Callback::new(move |query: String| {
            navigate(
                &format!("{base}?{query}"),
                NavigateOptions {
                    scroll: false,
                    ..Default::default()
                },
            )
        })
    };
    let on_pick = Callback::new(move |step: i64| go.run(format!("step={step}")));
    let on_range = Callback::new(move |(a, b): (i64, i64)| {
        let step = pinned
            .get_untracked()
            .map(|s| format!("step={s}&"))
            .unwrap_or_default();
        go.run(format!("{step}from={a}&to={b}"))
    });
    let clear = move |_| go.run("traces=1".to_string());
    let steps = Resource::new(
        {
            let r = run_id.clone();
            move || r.clone()
        },
        api::steps,
    );
    let traces = {
        let run_id = run_id.clone();
        Resource::new(
            move || pinned.get(),
            move |step| api::traces(Some(run_id.clone()), step_query(step)),
        )
    };
    let run_id_for_list = run_id.clone();
    let (panels_run, groups_run, changes_run) = (run_id.clone(), run_id.clone(), run_id.clone());
    // The run's attribute keys, which the value, split, group and score pickers offer.
    let keys = {
        let run_id = run_id.clone();
        ClientData::new(move || api::attribute_keys(run_id.clone()))
    };
    view! {
        <Suspense fallback=|| view! { <p class="loading">"Loading trace activity…"</p> }>
            {move || {
                let (run_id, metric_keys) = (run_id.clone(), metric_keys.clone());
                Suspend::new(async move {
                    match steps.await {
                        Ok(activity) if activity.steps.is_empty() => view! {
                            <p class="muted">{format!("{} traces, none with a step: the lane is hidden.", activity.totals.traces)}</p>
                        }.into_any(),
                        Ok(activity) => view! { <Timeline run_id activity metric_keys pinned on_pick range on_range/> }.into_any(),
                        Err(e) => view! { <p class="error">{e.message}</p> }.into_any(),
                    }
                })
            }}
        </Suspense>
        // Each panel waits for its own data, not for the others'.
        <Transition fallback=|| view! { <p class="loading">"Loading the rollouts…"</p> }>
            {move || {
                let run_id = panels_run.clone();
                Suspend::new(async move {
                    let activity = steps.await.ok().filter(|a| !a.steps.is_empty())?;
                    let domain = timeline::domain(&activity.steps);
                    Some(view! { <Rollouts run_id domain keys/> })
                })
            }}
        </Transition>
        <Transition fallback=|| view! { <p class="loading">"Loading the groups…"</p> }>
            {move || {
                let run_id = groups_run.clone();
                Suspend::new(async move {
                    let activity = steps.await.ok().filter(|a| !a.steps.is_empty())?;
                    let domain = timeline::domain(&activity.steps);
                    Some(view! { <GroupLens run_id domain pinned keys/> })
                })
            }}
        </Transition>
        <Transition fallback=|| ()>
            {move || {
                let run_id = changes_run.clone();
                Suspend::new(async move {
                    let activity = steps.await.ok().filter(|a| !a.steps.is_empty())?;
                    // The widest band: a lone failing step is rarely the dip a person came for.
                    let suggested = timeline::danger_runs(&activity.steps).into_iter().max_by_key(|(a, b)| (b - a, -a));
                    Some(view! { <WhatChanged run_id suggested range/> })
                })
            }}
        </Transition>
        {move || pinned.get().map(|step| view! {
            <p class="chips">
                <button class="chip" on:click=clear aria-label=format!("Clear step {step}")>
                    {format!("step {step}")} " ×"
                </button>
                <a class="compare-link" href=step_link(&compare_run, step)>"Compare this step's traces"</a>
            </p>
        })}
        <Suspense fallback=|| view! { <p class="loading">"Loading traces…"</p> }>
            {move || {
                let run_id = run_id_for_list.clone();
                Suspend::new(async move {
                match traces.await {
                    Ok(list) if list.traces.is_empty() => view! {
                        <p class="empty">"No traces here yet."</p>
                    }.into_any(),
                    Ok(list) => {
                        let query = step_query(pinned.get_untracked());
                        view! { <RunTraceList first=list run_id query/> }.into_any()
                    }
                    Err(e) => view! { <p class="error">{e.message}</p> }.into_any(),
                }
                })
            }}
        </Suspense>
    }
}

/// Traces per page of the run's list.
const PAGE: usize = 100;

/// The first page of the run's traces, of one step if one is pinned.
fn step_query(step: Option<i64>) -> ListQuery {
    ListQuery {
        min_step: step,
        max_step: step,
        limit: Some(PAGE),
        ..ListQuery::default()
    }
}

/// The run's traces (of the pinned step, if any), a page at a time: every trace
/// of a step is reachable, however many there are.
#[component]
fn RunTraceList(first: TraceList, run_id: String, query: ListQuery) -> impl IntoView {
    let traces = RwSignal::new(first.traces);
    // The root attributes these traces differ on: what tells sample 3 from sample 5.
    let differ = Memo::new(move |_| traces.with(|t| distinct::trace_keys(t, 3)));
    let cursor = RwSignal::new(first.next_cursor);
    let loading = RwSignal::new(false);
    let load_more = move |_| {
        let Some(c) = cursor.get_untracked() else {
            return;
        };
        loading.set(true);
        let (run_id, query) = (run_id.clone(), query.clone());
        leptos::task::spawn_local(async move {
            let next = ListQuery {
                cursor: Some(c),
                ..query
            };
            match api::traces(Some(run_id), next).await {
                Ok(page) => {
                    traces.update(|t| t.extend(page.traces));
                    cursor.set(page.next_cursor);
                }
                Err(e) => leptos::logging::warn!("load more failed: {}", e.message),
            }
            loading.set(false);
        });
    };
    view! {
        <ul class="run-traces" aria-label="Traces of this run">
            <For each=move || traces.get() key=|t| t.trace_id.clone() let:t>
                <RunTraceRow t differ/>
            </For>
        </ul>
        <Show when=move || cursor.with(Option::is_some)>
            <button type="button" class="load-more" on:click=load_more.clone() disabled=move || loading.get()>
                {move || if loading.get() { "Loading…".to_string() } else { format!("Load {PAGE} more") }}
            </button>
        </Show>
    }
}

#[component]
fn RunTraceRow(t: TraceSummary, differ: Memo<Vec<String>>) -> impl IntoView {
    let attributes = t.attributes.clone();
    let caption = move || {
        let keys = differ.get();
        (!keys.is_empty()).then(|| distinct::caption(&attributes, &keys))
    };
    let now = format::now_us();
    let href = link(&t.run_id, &t.trace_id, t.root_span_id.as_deref());
    let kinds = format::kinds(&t);
    view! {
        <li>
            <a href=href>
                <StatusBadge status=t.status/>
                <span class="name">{format::trace_name(&t)}</span>
                {t.step.map(|s| view! { <span class="step">{format!("step {s}")}</span> })}
                {move || caption().map(|c| view! { <span class="attrs">{c}</span> })}
                <span class="kinds">{kinds}</span>
                <span class="spans">{format::spans(t.span_count)}</span>
                {(t.error_count > 0).then(|| view! { <span class="bad">{format!("{} failed", t.error_count)}</span> })}
                <span class="duration">{t.duration_us.map(format::duration).unwrap_or_else(|| "running".into())}</span>
                <span class="updated" title=format::timestamp(t.updated_us)>{format::relative(t.updated_us, now)}</span>
            </a>
        </li>
    }
}

/// A run's traces, with those whose root failed apart from those that failed beneath
/// a root that did not: "80 (3 failed, 14 with failures beneath)".
fn trace_counts(s: &treeline_wire::RunSummary) -> String {
    let beneath = (s.error_trace_count - s.failed_trace_count).max(0);
    match (s.failed_trace_count, beneath) {
        (0, 0) => s.trace_count.to_string(),
        (failed, 0) => format!("{} ({failed} failed)", s.trace_count),
        (0, beneath) => format!("{} ({beneath} with failures beneath)", s.trace_count),
        (failed, beneath) => format!(
            "{} ({failed} failed, {beneath} with failures beneath)",
            s.trace_count
        ),
    }
}
