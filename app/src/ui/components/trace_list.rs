use leptos::prelude::*;

use crate::ui::api::{self, ApiError};
use crate::ui::compare_url::{compare_link, MAX_COLUMNS};
use crate::ui::components::status::StatusBadge;
use crate::ui::distinct;
use crate::ui::format::{self, DROPPED_TITLE};
use crate::ui::url::{WorkspaceUrl, LIST_PAGE};

mod review;
use treeline_wire::query::ListQuery;
use treeline_wire::{dropped_spans, TraceList as List, TraceSummary};

#[component]
pub fn TraceList(
    url: Memo<WorkspaceUrl>,
    list: Resource<Result<List, ApiError>>,
    go_to: Callback<WorkspaceUrl>,
) -> impl IntoView {
    // Picking traces to compare: their (trace, root span) ids, in the order picked.
    let picking = RwSignal::new(false);
    let picked: RwSignal<Vec<(String, String)>> = RwSignal::new(Vec::new());
    provide_context(Picks { picking, picked });
    let run_id = move || url.with(|u| u.run_id.clone());
    view! {
        <div class="pane-head">
            <strong class="grow">"Traces"</strong>
            {move || url.with(|u| u.review.is_none()).then(|| view! {
                <button type="button" class="link-button" title="Step through the list with j and k, scoring with digits and labelling with letters"
                    on:click=move |_| go_to.run(WorkspaceUrl { review: Some("score".into()), ..url.get_untracked() })>
                    "Review"
                </button>
            })}
            {move || run_id().map(|run| view! {
                <button type="button" class="link-button" aria-pressed=move || picking.get().to_string()
                    on:click=move |_| { picking.update(|p| *p = !*p); picked.set(Vec::new()); }>
                    {move || if picking.get() { "Cancel" } else { "Select to compare" }}
                </button>
                {move || (picking.get() && picked.with(Vec::len) >= 2).then(|| {
                    let href = picked.with(|p| compare_link(&run, p));
                    view! { <a class="compare-link" href=href>{move || format!("Compare {}", picked.with(Vec::len))}</a> }
                })}
            })}
        </div>
        <Transition fallback=|| view! { <p class="loading">"Loading traces…"</p> }>
            {move || Suspend::new(async move {
                match list.await {
                    Ok(first) => view! { <Rows first url go_to/> }.into_any(),
                    Err(e) => {
                        let clear = WorkspaceUrl { run_id: url.get_untracked().run_id, ..Default::default() };
                        view! {
                            <div class="error" role="alert">
                                <p>{e.message}</p>
                                <button type="button" on:click=move |_| go_to.run(clear.clone())>"Clear the filters"</button>
                            </div>
                        }.into_any()
                    }
                }
            })}
        </Transition>
    }
}

/// What a row's chips say, as part of its key in the list.
fn chips_key(t: &TraceSummary) -> String {
    t.notes
        .iter()
        .map(|c| format!("{}={}×{}", c.name, c.value, c.count))
        .collect::<Vec<_>>()
        .join(",")
}

/// The list's picking state, shared with its rows.
#[derive(Clone, Copy)]
struct Picks {
    picking: RwSignal<bool>,
    picked: RwSignal<Vec<(String, String)>>,
}

/// "37 traces match", "1 trace matches", "10,000+ traces match".
fn matched(n: i64, more: bool) -> String {
    let plus = if more { "+" } else { "" };
    if n == 1 && !more {
        "1 trace matches".into()
    } else {
        format!("{}{plus} traces match", format::count(n))
    }
}

#[component]
fn Rows(first: List, url: Memo<WorkspaceUrl>, go_to: Callback<WorkspaceUrl>) -> impl IntoView {
    let count = first.matched.map(|n| matched(n, first.matched_more));
    let traces = RwSignal::new(first.traces);
    let labels = RwSignal::new(review::Labels::default());
    let problem = review::keys(traces, url, go_to, labels);
    let reviewing = Memo::new(move |_| url.with(|u| u.review.is_some()));
    // The root attributes these traces differ on, shown while none is pinned.
    let differ = Memo::new(move |_| traces.with(|t| distinct::trace_keys(t, 3)));
    let cursor = RwSignal::new(first.next_cursor);
    let loading = RwSignal::new(false);
    let now = format::now_us();
    let load_more = move |_| {
        let Some(c) = cursor.get_untracked() else {
            return;
        };
        loading.set(true);
        let u = url.get_untracked();
        leptos::task::spawn_local(async move {
            let next = u.list_query().map(|q| ListQuery {
                limit: Some(LIST_PAGE),
                cursor: Some(c),
                ..q
            });
            let page = match next {
                Ok(query) => api::traces(u.run_id.clone(), query).await,
                Err(e) => Err(e.into()),
            };
            match page {
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
        <Show when=move || !traces.with(Vec::is_empty) fallback=move || {
            let u = url.get_untracked();
            let text = match (u.run_id.is_some(), u.window.is_some()) {
                (true, false) => "This run has no traces matching these filters.",
                (true, true) => "This run has no traces matching these filters in this window.",
                (false, _) => "No traces match these filters in this window.",
            };
            view! {
                <p class="empty">
                    {text}
                    " Loosen the status, kind, search, attribute or window filters, or pick another run."
                </p>
            }
        }>
            // A list of links, the selected one marked current: each row is one link, so
            // no focusable control sits inside another (a listbox option may hold none).
            {count.clone().map(|c| view! { <p class="count match-count" role="status">{c}</p> })}
            // Kept while the selection moves: a new banner would drop its label fetch.
            <Show when=move || reviewing.get()>
                <review::Banner url go_to labels/>
            </Show>
            {move || problem.get().map(|p| view! { <p class="error" role="alert">{p}</p> })}
            <ul class="trace-list" aria-label="Traces">
                // The chips in the key: review mode redraws a row's after scoring it.
                <For each=move || traces.get() key=|t| (t.run_id.clone(), t.trace_id.clone(), t.updated_us, chips_key(t)) let:t>
                    <TraceRow t=t.clone() url now differ/>
                </For>
            </ul>
        </Show>
        <Show when=move || cursor.with(Option::is_some)>
            <button type="button" class="load-more" on:click=load_more disabled=move || loading.get()>
                {move || if loading.get() { "Loading…" } else { "Load more" }}
            </button>
        </Show>
    }
}

#[component]
fn TraceRow(
    t: TraceSummary,
    url: Memo<WorkspaceUrl>,
    now: i64,
    /// The keys the list's traces differ on, shown when no column is pinned.
    differ: Memo<Vec<String>>,
) -> impl IntoView {
    let (run_id, trace_id) = (t.run_id.clone(), t.trace_id.clone());
    let selected = move || {
        let u = url.get();
        u.trace_id.as_deref() == Some(trace_id.as_str())
            && u.run_id.as_deref() == Some(run_id.as_str())
    };
    // A body search opens the span whose body matched.
    let opened = t
        .text_match
        .as_ref()
        .map(|m| m.span_id.as_str())
        .or(t.root_span_id.as_deref());
    let href = url
        .get_untracked()
        .with_selection(&t.run_id, &t.trace_id, opened)
        .href();
    let kinds = format::kinds(&t);
    // The pinned root attributes, as the row shows them; an absent one as a dash.
    // Read from the URL as it changes: pinning a column does not refetch the list.
    let attributes = t.attributes.clone();
    let pinned = move || -> Vec<(String, String)> {
        let columns = url.get().columns();
        let keys = if columns.is_empty() {
            // While the next list loads, this row stays on screen after the rows that
            // owned `differ` were replaced, and an address change still reaches it.
            differ.try_get().unwrap_or_default()
        } else {
            columns
        };
        keys.into_iter()
            .map(|key| {
                let value = match attributes.get(&key) {
                    None | Some(serde_json::Value::Null) => "—".to_string(),
                    Some(serde_json::Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                };
                (key, value)
            })
            .collect()
    };
    let name = format::trace_name(&t);
    let picks = use_context::<Picks>();
    let pick_box = picks.zip(t.root_span_id.clone()).map(|(p, root)| {
        let key = (t.trace_id.clone(), root);
        let checked = {
            let key = key.clone();
            move || p.picked.with(|list| list.contains(&key))
        };
        let full = move || p.picked.with(|list| list.len() >= MAX_COLUMNS);
        let label = format!("Compare {name}");
        move || p.picking.get().then(|| {
            let key = key.clone();
            let checked = checked.clone();
            let disabled = {
                let checked = checked.clone();
                move || full() && !checked()
            };
            view! {
                <input type="checkbox" class="pick" aria-label=label.clone() prop:checked=checked disabled=disabled
                    on:change=move |_| p.picked.update(|list| match list.iter().position(|k| *k == key) {
                        Some(i) => { list.remove(i); }
                        None => list.push(key.clone()),
                    })/>
            }
        })
    });
    view! {
        <li class="trace-row">
            {pick_box}
            <a href=href aria-current=move || selected().then_some("true")>
                <div class="line1">
                    <StatusBadge status=t.status/>
                    <span class="name" title=name.clone()>{name.clone()}</span>
                </div>
                <div class="line2">
                    <span class="run">{t.run_name.clone()}</span>
                    {t.step.map(|s| view! { <span class="step">{format!("step {s}")}</span> })}
                    <span class="kinds">{kinds}</span>
                    <span>{format::spans(t.span_count)}</span>
                    {(t.error_count > 0).then(|| view! { <span class="bad">{format!("{} failed", t.error_count)}</span> })}
                    {dropped_spans(&t.attributes).map(|n| view! {
                        <span class="bad" title=DROPPED_TITLE>{format::dropped(n)}</span>
                    })}
                    {(t.token_count > 0).then(|| view! { <span>{format!("{} tokens", t.token_count)}</span> })}
                    {(t.iteration_count > 0).then(|| view! { <span>{format!("{} iterations", t.iteration_count)}</span> })}
                    <span>{t.duration_us.map(format::duration).unwrap_or_else(|| "running".into())}</span>
                    <span title=format::timestamp(t.updated_us)>{format::relative(t.updated_us, now)}</span>
                </div>
                {t.text_match.clone().map(|m| view! {
                    <div class="line-text">
                        <span class="muted">{m.field.as_str()}": "</span>
                        {m.snippet.into_iter().map(|p| if p.hit {
                            view! { <mark>{p.text}</mark> }.into_any()
                        } else {
                            p.text.into_any()
                        }).collect_view()}
                    </div>
                })}
                {(!t.notes.is_empty()).then(|| view! {
                    <div class="line-notes">
                        {t.notes.iter().map(|n| {
                            let times = (n.count > 1).then(|| format!(" ×{}", n.count));
                            view! { <span class="chip note-chip">{n.name.clone()}" = "<strong>{format::note_value(&n.value)}</strong>{times}</span> }
                        }).collect_view()}
                    </div>
                })}
                {move || {
                    let pinned = pinned();
                    (!pinned.is_empty()).then(|| view! {
                        <div class="line3">
                            {pinned.into_iter().map(|(key, value)| view! {
                                <span class="attr"><span class="muted">{key}" "</span>{value}</span>
                            }).collect_view()}
                        </div>
                    })
                }}
            </a>
        </li>
    }
}
