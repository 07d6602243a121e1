use leptos::prelude::*;

use crate::ui::api::{self, ApiError};
use crate::ui::components::early_input;
use crate::ui::components::window_picker::WindowPicker;
use crate::ui::format;
use crate::ui::url::WorkspaceUrl;
use treeline_wire::limits::RUNS_PAGE_MAX;
use treeline_wire::run_list::RunListQuery;
use treeline_wire::{SpanKind, SpanStatus, TraceList, TraceWindow};

use treeline_wire::limits::MAX_SEARCH_TERMS as MAX_TERMS;

fn toggle(list: Option<String>, value: &str, on: bool) -> Option<String> {
    let mut items: Vec<String> = list
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty() && *s != value)
        .map(str::to_string)
        .collect();
    if on {
        items.push(value.to_string());
    }
    (!items.is_empty()).then(|| items.join(","))
}

fn has(list: &Option<String>, value: &str) -> bool {
    list.as_deref()
        .is_some_and(|l| l.split(',').any(|s| s == value))
}

/// A multi-select as a disclosure of checkboxes, bound to one comma list in the URL.
#[component]
fn MultiSelect(
    label: &'static str,
    options: Vec<(&'static str, &'static str)>,
    selected: Signal<Option<String>>,
    on_change: Callback<(String, bool)>,
) -> impl IntoView {
    // What is chosen, by name while that reads at a glance ("Status: completed").
    let names = options.clone();
    let summary = move || {
        let chosen: Vec<&str> = selected.with(|l| {
            l.as_deref()
                .unwrap_or_default()
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|v| {
                    names
                        .iter()
                        .find(|(value, _)| *value == v)
                        .map_or("?", |(_, text)| *text)
                })
                .collect()
        });
        match chosen.len() {
            0 => format!("{label}: any"),
            1 | 2 => format!("{label}: {}", chosen.join(", ")),
            n => format!("{label}: {n}"),
        }
    };
    view! {
        <details class="multi">
            <summary>{summary}</summary>
            <div role="group" aria-label=label>
                {options.into_iter().map(|(value, text)| view! {
                    <label>
                        <input type="checkbox" value=value
                            prop:checked=move || has(&selected.get(), value)
                            on:change=move |ev| on_change.run((value.to_string(), event_target_checked(&ev)))/>
                        {text}
                    </label>
                }).collect_view()}
            </div>
        </details>
    }
}

#[component]
pub fn Filters(
    url: Memo<WorkspaceUrl>,
    go_to: Callback<WorkspaceUrl>,
    list: Resource<Result<TraceList, ApiError>>,
) -> impl IntoView {
    let project = Memo::new(move |_| url.get().project);
    let projects = Resource::new(|| (), |_| api::projects());
    let runs = Resource::new(
        move || project.get(),
        |project| {
            api::runs(RunListQuery {
                project,
                limit: RUNS_PAGE_MAX,
                ..RunListQuery::default()
            })
        },
    );
    // Type-ahead over every run, by a piece of its name or id.
    let find = RwSignal::new(String::new());
    let found = Resource::new(
        move || find.get(),
        |text| async move {
            if text.trim().chars().count() < 2 {
                return Vec::new();
            }
            api::find_runs(text.trim().to_string())
                .await
                .map(|l| l.runs)
                .unwrap_or_default()
        },
    );
    let text = RwSignal::new(url.get_untracked().q.unwrap_or_default());
    // A new address brings its own search; the first run would only repeat it, and
    // would undo what `early_input` restores.
    Effect::watch(
        move || url.get().q,
        move |q, _, _| text.set(q.clone().unwrap_or_default()),
        false,
    );
    let words = RwSignal::new(url.get_untracked().text.unwrap_or_default());
    Effect::watch(
        move || url.get().text,
        move |t, _, _| words.set(t.clone().unwrap_or_default()),
        false,
    );
    early_input::keep(r#"form.filters input[name="q"]"#, text);
    early_input::keep(r#"form.filters input[name="text"]"#, words);
    early_input::keep(r#"form.filters input[list="run-matches"]"#, find);
    let terms = move || text.get().split_whitespace().count();
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if terms() > MAX_TERMS {
            return;
        }
        let q = text
            .get_untracked()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let body_text = words.get_untracked().trim().to_string();
        go_to.run(WorkspaceUrl {
            q: (!q.is_empty()).then_some(q),
            text: (!body_text.is_empty()).then_some(body_text),
            trace_id: None,
            span_id: None,
            ..url.get_untracked()
        });
    };
    let statuses: Vec<(&'static str, &'static str)> = SpanStatus::ALL
        .iter()
        .map(|s| (s.as_str(), s.label()))
        .collect();
    let kinds: Vec<(&'static str, &'static str)> = SpanKind::ALL
        .iter()
        .map(|k| (k.as_str(), k.as_str()))
        .collect();
    let set_status = Callback::new(move |(v, on): (String, bool)| {
        let u = url.get_untracked();
        go_to.run(WorkspaceUrl {
            status: toggle(u.status.clone(), &v, on),
            trace_id: None,
            span_id: None,
            ..u
        });
    });
    let set_kind = Callback::new(move |(v, on): (String, bool)| {
        let u = url.get_untracked();
        go_to.run(WorkspaceUrl {
            kind: toggle(u.kind.clone(), &v, on),
            trace_id: None,
            span_id: None,
            ..u
        });
    });
    let window_text = move |window: Option<TraceWindow>| {
        let u = url.get_untracked();
        match (u.run_id, window) {
            (Some(run), None) => format!("all traces of run {run}"),
            (
                _,
                Some(TraceWindow {
                    since_us: Some(since),
                    until_us: None,
                }),
            ) => {
                let hours = ((format::now_us() - since) as f64 / 3_600e6).round() as i64;
                match hours {
                    ..=1 => "updated in the last hour".into(),
                    2..=47 => format!("updated in the last {hours} hours"),
                    _ => format!("updated in the last {} days", (hours + 12) / 24),
                }
            }
            (_, Some(w)) => format!(
                "{} – {}",
                w.since_us
                    .map(format::timestamp)
                    .unwrap_or_else(|| "start".into()),
                w.until_us
                    .map(format::timestamp)
                    .unwrap_or_else(|| "now".into())
            ),
            (None, None) => String::new(),
        }
    };
    view! {
        <form class="filters" role="search" on:submit=submit>
            <label>
                "Project"
                <Suspense fallback=|| view! { <select disabled=true><option>"loading…"</option></select> }>
                    {move || Suspend::new(async move {
                        let (list, failed) = match projects.await {
                            Ok(p) => (p.projects, None),
                            Err(e) => (Vec::new(), Some(format!("projects could not be loaded: {}", e.message))),
                        };
                        let current = url.get().project.unwrap_or_default();
                        view! {
                            <select on:change=move |ev| {
                                let v = event_target_value(&ev);
                                go_to.run(WorkspaceUrl { project: (!v.is_empty()).then_some(v), run_id: None, trace_id: None, span_id: None, ..url.get_untracked() });
                            }>
                                <option value="" selected=current.is_empty()>{failed.unwrap_or_else(|| "All projects".into())}</option>
                                {list.into_iter().map(|p| {
                                    let selected = p.name == current;
                                    view! { <option value=p.name.clone() selected=selected>{format!("{} ({} runs)", p.name, p.runs)}</option> }
                                }).collect_view()}
                            </select>
                        }
                    })}
                </Suspense>
            </label>
            <label>
                "Find a run"
                <input type="search" list="run-matches" placeholder="name or id" autocomplete="off"
                    prop:value=move || find.get()
                    on:input=move |ev| find.set(event_target_value(&ev))
                    on:change=move |ev| {
                        let v = event_target_value(&ev);
                        let hit = found.get_untracked().unwrap_or_default().into_iter().find(|r| r.run_id == v);
                        if let Some(run) = hit {
                            find.set(String::new());
                            go_to.run(WorkspaceUrl { run_id: Some(run.run_id), project: Some(run.project), trace_id: None, span_id: None, ..url.get_untracked() });
                        }
                    }/>
                <datalist id="run-matches">
                    <Transition fallback=|| ()>
                        {move || Suspend::new(async move {
                            found.await.into_iter().map(|r| view! {
                                <option value=r.run_id.clone()>{format!("{} — {}", r.name, r.project)}</option>
                            }).collect_view()
                        })}
                    </Transition>
                </datalist>
            </label>
            <label>
                "Run"
                <Suspense fallback=|| view! { <select disabled=true><option>"loading…"</option></select> }>
                    {move || Suspend::new(async move {
                        let (list, failed) = match runs.await {
                            Ok(r) => (r.runs, None),
                            Err(e) => (Vec::new(), Some(format!("runs could not be loaded: {}", e.message))),
                        };
                        let current = url.get().run_id.unwrap_or_default();
                        view! {
                            <select on:change=move |ev| {
                                let v = event_target_value(&ev);
                                go_to.run(WorkspaceUrl { run_id: (!v.is_empty()).then_some(v), trace_id: None, span_id: None, ..url.get_untracked() });
                            }>
                                <option value="" selected=current.is_empty()>{failed.clone().unwrap_or_else(|| if project.get_untracked().is_some() { "All runs of the project".into() } else { "All runs".into() })}</option>
                                {list.into_iter().map(|r| {
                                    let selected = r.run_id == current;
                                    view! { <option value=r.run_id.clone() selected=selected>{format!("{} — {}", r.name, r.project)}</option> }
                                }).collect_view()}
                            </select>
                        }
                    })}
                </Suspense>
            </label>
            <MultiSelect label="Status" options=statuses selected=Signal::derive(move || url.get().status) on_change=set_status/>
            <MultiSelect label="Kind" options=kinds selected=Signal::derive(move || url.get().kind) on_change=set_kind/>
            <label>
                "Search"
                // `value` too, so the page as served holds the search (a property is
                // set by the browser's code only, and `early_input` would read it empty).
                <input type="search" name="q" placeholder="name, trace id, rollout id, thread"
                    aria-describedby="search-terms"
                    value=text.get_untracked()
                    prop:value=move || text.get()
                    on:input=move |ev| text.set(event_target_value(&ev))/>
            </label>
            <span id="search-terms" class="terms" class:over=move || { terms() > MAX_TERMS } role="status">
                {move || if terms() > MAX_TERMS {
                    format!("{} terms: at most {MAX_TERMS} are allowed", terms())
                } else {
                    format!("{}/{MAX_TERMS} terms", terms())
                }}
            </span>
            <label>
                "In bodies"
                <input type="search" name="text" placeholder=r#"words or "a phrase" in inputs, outputs, errors"#
                    value=words.get_untracked()
                    prop:value=move || words.get()
                    on:input=move |ev| words.set(event_target_value(&ev))/>
            </label>
            <button type="submit" disabled=move || { terms() > MAX_TERMS }>"Search"</button>
            <WindowPicker url go_to/>
            {move || {
                let u = url.get();
                step_range_label(u.min_step, u.max_step).map(|label| view! {
                    <button type="button" class="chip" aria-label=format!("Clear {label}")
                        on:click=move |_| go_to.run(WorkspaceUrl { min_step: None, max_step: None, trace_id: None, span_id: None, ..url.get_untracked() })>
                        {label.clone()} " ×"
                    </button>
                })
            }}
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let window = list.await.ok().and_then(|l| l.window);
                    view! { <span class="window">{window_text(window)}</span> }
                })}
            </Transition>
        </form>
    }
}

/// How a pinned step range reads in its chip.
fn step_range_label(min: Option<i64>, max: Option<i64>) -> Option<String> {
    match (min, max) {
        (Some(a), Some(b)) if a == b => Some(format!("step {a}")),
        (Some(a), Some(b)) => Some(format!("steps {a}–{b}")),
        (Some(a), None) => Some(format!("steps from {a}")),
        (None, Some(b)) => Some(format!("steps to {b}")),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_range_reads_as_words() {
        assert_eq!(
            step_range_label(Some(3), Some(3)).as_deref(),
            Some("step 3")
        );
        assert_eq!(
            step_range_label(Some(3), Some(9)).as_deref(),
            Some("steps 3–9")
        );
        assert_eq!(
            step_range_label(None, Some(9)).as_deref(),
            Some("steps to 9")
        );
        assert_eq!(step_range_label(None, None), None);
    }

    #[test]
    fn a_comma_list_toggles_values() {
        assert_eq!(toggle(None, "ok", true), Some("ok".into()));
        assert_eq!(
            toggle(Some("ok,error".into()), "ok", false),
            Some("error".into())
        );
        assert_eq!(toggle(Some("ok".into()), "ok", false), None);
        assert!(has(&Some("ok,error".into()), "error"));
    }
}
