use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_query_map};
use leptos_router::NavigateOptions;

use crate::ui::api::{self, encode};
use crate::ui::components::config_diff::ConfigDiff;
use crate::ui::components::run_chart::{colour, data_domain, ChartLine, RunChart};
use crate::ui::components::status::RunBadge;
use crate::ui::run_compare_url::{RunCompareUrl, XAxis, MAX_SMOOTH};
use treeline_wire::run_compare::{ComparedMetric, RunComparison, COMPARE_RUNS_MAX};
use treeline_wire::RunDetail;

/// `/compare-runs?run=A&run=B…`: the runs' metrics on shared charts, then their
/// configs with the keys that differ first. Everything the reader sets is in the
/// link.
#[component]
pub fn CompareRunsPage() -> impl IntoView {
    let query = use_query_map();
    let state = Memo::new(move |_| RunCompareUrl::from_query(&query.read()));
    let asked = Memo::new(move |_| state.read().query());
    let data = Resource::new(
        move || asked.get(),
        |q| async move {
            if q.runs.is_empty() {
                Ok(None)
            } else {
                api::compare_runs(q).await.map(Some)
            }
        },
    );
    let go = {
        let navigate = use_navigate();
        Callback::new(move |url: RunCompareUrl| {
            navigate(
                &url.href(),
                NavigateOptions {
                    scroll: false,
                    replace: true,
                    ..Default::default()
                },
            )
        })
    };
    view! {
        <section class="page compare-runs">
            <div class="page-head">
                <h1>"Compare runs"</h1>
            </div>
            <Transition fallback=|| view! { <p class="loading">"Loading the runs…"</p> }>
                {move || Suspend::new(async move {
                    match data.await {
                        Ok(None) => view! {
                            <p class="empty">
                                "No runs picked. Tick two or more runs (up to " {COMPARE_RUNS_MAX} ") in "
                                <a href="/">"the runs list"</a>" and choose Compare."
                            </p>
                        }.into_any(),
                        Err(e) => view! {
                            <p class="error" role="alert">"These runs cannot be compared: " {e.message} " "
                                <a href="/">"Back to the runs list"</a></p>
                        }.into_any(),
                        Ok(Some(c)) => view! { <Comparison c state go/> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

#[component]
fn Comparison(
    c: RunComparison,
    state: Memo<RunCompareUrl>,
    go: Callback<RunCompareUrl>,
) -> impl IntoView {
    let runs = StoredValue::new(c.runs.clone());
    let metrics = StoredValue::new(c.metrics.clone());
    let drawn: Vec<String> = c.metrics.iter().map(|m| m.key.clone()).collect();
    let names: Vec<String> = c.runs.iter().map(|r| r.summary.name.clone()).collect();
    let configs: Vec<serde_json::Value> = c.runs.iter().map(|r| r.config.clone()).collect();
    let one = c.runs.len() < 2;
    let project = c
        .runs
        .first()
        .map(|r| r.summary.project.clone())
        .unwrap_or_default();
    let add_more = format!(
        "/?project={}&{}",
        encode(&project),
        c.runs
            .iter()
            .map(|r| format!("pick={}", encode(&r.summary.run_id)))
            .collect::<Vec<_>>()
            .join("&")
    );
    view! {
        {one.then(|| view! {
            <p class="hint">"Only one run is picked. " <a href=add_more.clone()>"Pick more runs to compare"</a></p>
        })}
        <Legend runs=c.runs.clone() state go/>
        <Controls state go keys=c.keys.iter().map(|k| (k.key.clone(), k.runs)).collect() drawn total=c.runs.len()/>
        <div class="chart-grid compare-charts">
            {move || {
                let s = state.get();
                metrics.with_value(|metrics| runs.with_value(|runs| {
                    metrics.iter().map(|m| chart_of(m, runs, &s, go)).collect_view()
                }))
            }}
        </div>
        <section class="config-section">
            <h2>"Config"</h2>
            <ConfigDiff names configs/>
        </section>
        <p class="muted"><a href=add_more>"Change the runs compared"</a></p>
    }
}

/// Each run with its colour, a link to it, and a box that shows or hides its lines.
#[component]
fn Legend(
    runs: Vec<RunDetail>,
    state: Memo<RunCompareUrl>,
    go: Callback<RunCompareUrl>,
) -> impl IntoView {
    view! {
        <ul class="run-legend" aria-label="Runs compared">
            {runs.into_iter().enumerate().map(|(i, run)| {
                let id = run.summary.run_id.clone();
                let hidden = {
                    let id = id.clone();
                    Signal::derive(move || state.read().hide.contains(&id))
                };
                let toggle = {
                    let id = id.clone();
                    move |_| {
                        let mut url = state.get_untracked();
                        if let Some(at) = url.hide.iter().position(|h| *h == id) {
                            url.hide.remove(at);
                        } else {
                            url.hide.push(id.clone());
                        }
                        go.run(url);
                    }
                };
                let name = run.summary.name.clone();
                view! {
                    <li class:hidden-run=hidden>
                        <label>
                            <input type="checkbox" prop:checked=move || !hidden.get() on:change=toggle
                                aria-label=format!("Show {name}")/>
                            <span class="swatch" style=format!("background: {}", colour(i))></span>
                        </label>
                        <a href=format!("/runs/{}", encode(&id))>{run.summary.name.clone()}</a>
                        " " <RunBadge status=run.summary.status/>
                        <span class="muted">{format!(" {}", run.summary.project)}</span>
                    </li>
                }
            }).collect_view()}
        </ul>
    }
}

/// Smoothing, the x-axis, the zoom and which metrics are drawn.
#[component]
fn Controls(
    state: Memo<RunCompareUrl>,
    go: Callback<RunCompareUrl>,
    /// Every metric of the runs, with how many runs logged it.
    keys: Vec<(String, usize)>,
    /// The metrics the server drew.
    drawn: Vec<String>,
    total: usize,
) -> impl IntoView {
    let set_smooth = move |ev| {
        let value = event_target_value(&ev).parse::<f64>().unwrap_or(0.0);
        let mut url = state.get_untracked();
        url.smooth = value.clamp(0.0, MAX_SMOOTH);
        go.run(url);
    };
    let set_axis = move |ev| {
        let text = event_target_value(&ev);
        let mut url = state.get_untracked();
        if let Some(x) = XAxis::ALL.into_iter().find(|x| x.param() == text) {
            // A zoom is in the old axis's units.
            url.zoom = None;
            url.x = x;
            go.run(url);
        }
    };
    let reset = move |_| {
        let mut url = state.get_untracked();
        url.zoom = None;
        go.run(url);
    };
    let drawn = StoredValue::new(drawn);
    let shown_count = drawn.with_value(Vec::len);
    let key_count = keys.len();
    view! {
        <div class="compare-controls">
            <label class="smooth">
                "Smoothing "
                <input type="range" min="0" max=MAX_SMOOTH.to_string() step="0.01"
                    prop:value=move || format!("{:.2}", state.read().smooth)
                    on:input=set_smooth/>
                <output>{move || {
                    let s = state.read().smooth;
                    if s > 0.0 { format!("{s:.2}") } else { "off".to_string() }
                }}</output>
            </label>
            <label>
                "X-axis "
                <select on:change=set_axis prop:value=move || state.read().x.param()>
                    {XAxis::ALL.into_iter().map(|x| view! {
                        <option value=x.param() selected=move || state.read().x == x>{x.label()}</option>
                    }).collect_view()}
                </select>
            </label>
            {move || state.read().zoom.is_some().then(|| view! {
                <button type="button" on:click=reset>"Reset zoom"</button>
            })}
            <span class="muted">"Drag across a chart to zoom; double-click it to reset."</span>
            <details class="metric-picker">
                <summary>{format!("Metrics: {shown_count} of {key_count} drawn")}</summary>
                <ul>
                    {keys.into_iter().map(|(key, runs)| {
                        let on = drawn.with_value(|d| d.contains(&key));
                        let toggle = {
                            let key = key.clone();
                            move |_| {
                                let mut url = state.get_untracked();
                                let mut list = drawn.get_value();
                                if let Some(at) = list.iter().position(|k| *k == key) {
                                    list.remove(at);
                                } else {
                                    list.push(key.clone());
                                }
                                url.keys = list;
                                go.run(url);
                            }
                        };
                        view! {
                            <li><label>
                                <input type="checkbox" prop:checked=on on:change=toggle/>
                                <code>{key.clone()}</code>
                                <span class="muted">{format!(" {runs} of {total} runs")}</span>
                            </label></li>
                        }
                    }).collect_view()}
                </ul>
            </details>
        </div>
    }
}

/// A metric's chart: a line per shown run that logged it, on the axis chosen.
fn chart_of(
    m: &ComparedMetric,
    runs: &[RunDetail],
    s: &RunCompareUrl,
    go: Callback<RunCompareUrl>,
) -> AnyView {
    let mut lines = Vec::new();
    let mut missing = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        if s.hide.contains(&run.summary.run_id) {
            continue;
        }
        let name = run.summary.name.clone();
        let Some(series) = m.series.iter().find(|x| x.run_id == run.summary.run_id) else {
            missing.push(name);
            continue;
        };
        let points: Vec<(f64, f64)> = series
            .series
            .points
            .iter()
            .zip(series.series.ts.iter().chain(std::iter::repeat(&None)))
            .filter_map(|(&(step, v), &ts)| {
                let x = match s.x {
                    XAxis::Step => Some(step),
                    XAxis::Wall => ts,
                    XAxis::Elapsed => ts.map(|t| t - run.summary.start_us),
                }?;
                Some((x as f64, v))
            })
            .collect();
        if points.is_empty() {
            missing.push(if series.series.points.is_empty() || s.x == XAxis::Step {
                name
            } else {
                format!("{name} (no times logged)")
            });
            continue;
        }
        lines.push(ChartLine {
            name,
            colour: i,
            points,
        });
    }
    let domain = s
        .zoom
        .map(|(a, b)| (a as f64, b as f64))
        .or_else(|| data_domain(&lines));
    let Some(domain) = domain else {
        return view! {
            <figure class="chart run-chart">
                <figcaption><span class="chart-title">{m.key.clone()}</span></figcaption>
                <p class="chart-placeholder">"No run shown logged this metric."</p>
            </figure>
        }
        .into_any();
    };
    let axis = s.x;
    let here = s.clone();
    let on_zoom = Callback::new(move |(a, b): (f64, f64)| {
        let mut url = here.clone();
        let (a, b) = (a.floor() as i64, b.ceil() as i64);
        if a < b {
            url.zoom = Some((a, b));
            go.run(url);
        }
    });
    let here = s.clone();
    let on_reset = Callback::new(move |()| {
        let mut url = here.clone();
        url.zoom = None;
        go.run(url);
    });
    view! {
        <RunChart label=m.key.clone() lines missing axis domain smooth=s.smooth on_zoom on_reset/>
    }
    .into_any()
}
