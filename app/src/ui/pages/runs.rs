use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_query_map};
use leptos_router::NavigateOptions;

use serde_json::Value;

use crate::ui::api::{self, encode};
use crate::ui::components::chart::short;
use crate::ui::components::early_input;
use crate::ui::components::status::RunBadge;
use crate::ui::format;
use crate::ui::runs_url::RunsUrl;
use treeline_wire::run_compare::COMPARE_RUNS_MAX;
use treeline_wire::run_list::{MetricStat, RunColumn, RUN_COLUMNS_MAX};
use treeline_wire::{human_bytes, RunSummary};

/// `/`: every run, newest first or by a summary column, by project, narrowed by a
/// filter as you type.
#[component]
pub fn RunsPage() -> impl IntoView {
    let query = use_query_map();
    // The project, ticks, columns and sort, in the link (`pick=` so a selection
    // survives a reload and "compare with…" on a run's page can start one).
    let view_url = Memo::new(move |_| RunsUrl::from_query(&query.read()));
    let project = move || view_url.read().project.clone();
    let runs = Resource::new(
        move || view_url.read().list_query(),
        |asked| async move {
            match asked {
                Ok(q) => api::runs(q).await,
                Err(e) => Err(api::ApiError::from(e)),
            }
        },
    );
    let projects = Resource::new(|| (), |_| api::projects());
    let filter = RwSignal::new(String::new());
    early_input::keep(r#"section.runs label.filter input"#, filter);
    let picked = Memo::new(move |_| view_url.read().picks.clone());
    let navigate = use_navigate();
    let go = Callback::new(move |next: RunsUrl| {
        navigate(
            &next.href(),
            NavigateOptions {
                scroll: false,
                replace: true,
                ..Default::default()
            },
        );
    });
    let set_picked =
        Callback::new(move |ids: Vec<String>| go.run(view_url.get_untracked().with_picks(ids)));

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
                        let retention = list
                            .iter()
                            .find(|p| p.name == current)
                            .and_then(|p| p.retention)
                            .map(|policy| view! {
                                <p class="retention" title="Closed traces not updated for longer are removed; open ones stay">
                                    "Retention: " {policy.describe()}
                                </p>
                            });
                        // What the shown runs take on disk: the project's, or every project's.
                        let bytes: i64 = list
                            .iter()
                            .filter(|p| current.is_empty() || p.name == current)
                            .map(|p| p.size_bytes)
                            .sum();
                        let size = view! {
                            <p class="disk-size" title=SIZE_NOTE>
                                {format!("{} on disk", human_bytes(bytes))}
                            </p>
                        };
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
                            {size}
                            {retention}
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
            <ColumnPicker view_url go/>
            <Suspense fallback=|| view! { <p class="loading">"Loading runs…"</p> }>
                {move || Suspend::new(async move {
                    match runs.await {
                        Err(e) => view! {
                            <p class="error" role="alert">"Could not load runs: " {e.message}</p>
                        }.into_any(),
                        Ok(list) if list.runs.is_empty() && project().is_some() => view! {
                            <p class="empty">"No runs in this project match."</p>
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
                            <RunTable rows=list.runs columns=list.columns filter picked set_picked view_url go/>
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
    columns: Vec<String>,
    filter: RwSignal<String>,
    picked: Memo<Vec<String>>,
    set_picked: Callback<Vec<String>>,
    view_url: Memo<RunsUrl>,
    go: Callback<RunsUrl>,
) -> impl IntoView {
    let total = rows.len();
    // The columns as the server answered them, so each run's values line up.
    let columns: Vec<(String, Option<RunColumn>)> = columns
        .into_iter()
        .map(|c| {
            let parsed = RunColumn::parse(&c, "column").ok();
            (c, parsed)
        })
        .collect();
    let columns = StoredValue::new(columns);
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
                    <th class="num" title=SIZE_NOTE>"Size"</th>
                    {columns.get_value().into_iter().map(|(spec, column)| {
                        column_head(spec, column, view_url, go)
                    }).collect_view()}
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
                        <td class="num">{human_bytes(run.size_bytes)}</td>
                        {columns.get_value().into_iter().enumerate().map(|(i, (_, column))| {
                            let value = run.values.get(i).cloned().unwrap_or(Value::Null);
                            column_cell(&value, column.as_ref())
                        }).collect_view()}
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

/// How a size on disk is made, for a tooltip.
pub const SIZE_NOTE: &str = "An estimate of the bytes on disk, indexes included: its share of \
    the database, in proportion to what its spans, bodies and metric points brought";

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

/// A summary column's head: its name as a button that sorts by it, and a way to
/// remove it.
fn column_head(
    spec: String,
    column: Option<RunColumn>,
    view_url: Memo<RunsUrl>,
    go: Callback<RunsUrl>,
) -> impl IntoView {
    let label = column
        .as_ref()
        .map_or_else(|| spec.clone(), RunColumn::label);
    let sorted = {
        let spec = spec.clone();
        move || {
            let url = view_url.read();
            match (url.sort.as_deref() == Some(spec.as_str()), url.ascending) {
                (false, _) => "none",
                (true, false) => "descending",
                (true, true) => "ascending",
            }
        }
    };
    let arrow = {
        let sorted = sorted.clone();
        move || match sorted() {
            "descending" => " ↓",
            "ascending" => " ↑",
            _ => "",
        }
    };
    let numeric = matches!(column, Some(RunColumn::Metric { .. }));
    let (sort_spec, drop_spec) = (spec.clone(), spec);
    view! {
        <th class="summary-col" class:num=numeric aria-sort=sorted>
            <button type="button" class="sort" title="Sort by this column"
                on:click=move |_| go.run(view_url.get_untracked().sorted_by(&sort_spec))>
                {label.clone()}<span aria-hidden="true">{arrow}</span>
            </button>
            <button type="button" class="remove" aria-label=format!("Remove column {label}")
                on:click=move |_| go.run(view_url.get_untracked().without_column(&drop_spec))>
                "×"
            </button>
        </th>
    }
}

/// A run's value of a summary column: a metric's number, a config value as given.
fn column_cell(value: &Value, column: Option<&RunColumn>) -> impl IntoView {
    let numeric = matches!(column, Some(RunColumn::Metric { .. }));
    let text = match value {
        Value::Null => None,
        Value::Number(n) if numeric => n.as_f64().map(short),
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    };
    view! {
        <td class:num=numeric class="summary-col">
            {match text {
                Some(t) => view! { <span>{t}</span> }.into_any(),
                None => view! { <span class="muted" title="Not logged by this run">"–"</span> }.into_any(),
            }}
        </td>
    }
}

/// Adds a summary column: a metric's last, smallest or largest value, or a config
/// value, named from what the project's runs logged. The form is drawn once the
/// picker is first opened, from a chunk of its own: the runs list is the front page,
/// and its first load need not carry it.
#[component]
fn ColumnPicker(view_url: Memo<RunsUrl>, go: Callback<RunsUrl>) -> impl IntoView {
    let opened = RwSignal::new(false);
    view! {
        <details class="column-picker">
            <summary on:click=move |_| opened.set(true)>
                {move || match view_url.read().columns.len() {
                    0 => "Add columns: a metric's value or a config value".to_string(),
                    n => format!("Columns: {n} added"),
                }}
            </summary>
            {move || opened.get().then(|| view! {
                <Suspense fallback=|| view! { <p class="loading">"Loading…"</p> }>
                    {move || Suspend::new(async move { column_form(view_url, go).await })}
                </Suspense>
            })}
        </details>
    }
}

#[lazy]
fn column_form(view_url: Memo<RunsUrl>, go: Callback<RunsUrl>) -> AnyView {
    let fields = Resource::new(move || view_url.read().project.clone(), api::run_fields);
    let kind = RwSignal::new("last".to_string());
    let name = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let full = move || view_url.read().columns.len() >= RUN_COLUMNS_MAX;
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let spec = format!("{}:{}", kind.get_untracked(), name.get_untracked().trim());
        match RunColumn::parse(&spec, "column") {
            Err(e) => error.set(Some(e.message)),
            Ok(column) => {
                error.set(None);
                name.set(String::new());
                go.run(view_url.get_untracked().with_column(column.to_string()));
            }
        }
    };
    let metric_kind = move || kind.get() != "config";
    view! {
        <form on:submit=submit>
            <label>
                "Show "
                <select prop:value=move || kind.get()
                    on:change=move |ev| kind.set(event_target_value(&ev))>
                    <option value=MetricStat::Last.as_str()>"Last value of metric"</option>
                    <option value=MetricStat::Min.as_str()>"Smallest value of metric"</option>
                    <option value=MetricStat::Max.as_str()>"Largest value of metric"</option>
                    <option value="config">"Config value"</option>
                </select>
            </label>
            <label>
                {move || if metric_kind() { "Metric " } else { "Config key " }}
                <input type="text" required
                    placeholder=move || if metric_kind() { "reward/mean" } else { "model.layers" }
                    list=move || if metric_kind() { "run-metric-keys" } else { "run-config-paths" }
                    prop:value=move || name.get()
                    on:input=move |ev| name.set(event_target_value(&ev))/>
            </label>
            <button type="submit" disabled=full>"Add column"</button>
            {move || full().then(|| view! {
                <span class="muted">{format!("(at most {RUN_COLUMNS_MAX})")}</span>
            })}
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
        </form>
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                let fields = fields.await.unwrap_or_default();
                view! {
                    <datalist id="run-metric-keys">
                        {fields.metric_keys.into_iter().map(|k| view! { <option value=k/> }).collect_view()}
                    </datalist>
                    <datalist id="run-config-paths">
                        {fields.config_paths.into_iter().map(|k| view! { <option value=k/> }).collect_view()}
                    </datalist>
                }
            })}
        </Suspense>
    }
    .into_any()
}
