use leptos::prelude::*;
use serde_json::{Map, Value};

use super::annotations::{Annotations, Target};
use super::body::{BodyView, Highlight};
use super::CopyButton;
use crate::ui::api::{self, ApiError};
use crate::ui::compare_url::{children_link, compare_link, SpanRef, MAX_COLUMNS};
use crate::ui::components::status::StatusBadge;
use crate::ui::format::{self, DROPPED_TITLE};
use crate::ui::url::{link, WorkspaceUrl};
use treeline_wire::text::TextQuery;
use treeline_wire::{dropped_spans, RolloutMatches, SpanDetail, SpanKind};

#[component]
pub fn Inspector(
    url: Memo<WorkspaceUrl>,
    detail: Resource<Option<Result<SpanDetail, ApiError>>>,
) -> impl IntoView {
    provide_context(Highlight(Memo::new(move |_| {
        url.with(|u| u.text.as_deref().and_then(|t| TextQuery::parse(t).ok()))
    })));
    view! {
        <div class="pane-head"><strong>"Span"</strong></div>
        // Transition: a reread of the same span keeps showing it until the new one is in.
        <Transition fallback=|| view! { <p class="loading">"Loading span…"</p> }>
            {move || Suspend::new(async move {
                match detail.await {
                    None => view! { <p class="empty">"Select a span in the tree to inspect it."</p> }.into_any(),
                    Some(Err(e)) if e.code == "span_not_found" || e.code == "trace_not_found" || e.code == "run_not_found" => {
                        let u = url.get_untracked();
                        let message = match e.code.as_str() {
                            "span_not_found" => format!(
                                "span {} not found in trace {}",
                                u.span_id.unwrap_or_default(),
                                u.trace_id.unwrap_or_default()
                            ),
                            _ => e.message,
                        };
                        view! { <p class="error" role="alert">{message}</p> }.into_any()
                    }
                    Some(Err(e)) => view! { <p class="error" role="alert">{e.message}</p> }.into_any(),
                    Some(Ok(d)) => view! { <SpanView d/> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// "copy" for a value shown beside it.
#[component]
fn CopyValue(text: String, label: &'static str) -> impl IntoView {
    let text = Callback::new(move |()| Some(text.clone()));
    view! { <CopyButton text caption="copy" label/> }
}

#[component]
fn SpanView(d: SpanDetail) -> impl IntoView {
    let n = &d.node;
    let chat = n.kind == SpanKind::Model;
    let duration = n
        .duration_us
        .map(format::duration)
        .unwrap_or_else(|| "still running".into());
    let links = d.links.clone();
    let run_id = d.run_id.clone();
    view! {
        <h2 class="span-name">{n.name.clone()}</h2>
        {dropped_spans(&d.attributes).map(|n| view! {
            <p class="error" role="note">{format!("{}: {DROPPED_TITLE}.", format::dropped(n))}</p>
        })}
        <dl>
            <dt>"Span id"</dt>
            <dd><code>{n.span_id.clone()}</code><CopyValue text=n.span_id.clone() label="Copy span id"/></dd>
            <dt>"Trace id"</dt>
            <dd><code>{d.trace_id.clone()}</code><CopyValue text=d.trace_id.clone() label="Copy trace id"/></dd>
            <dt>"Status"</dt><dd><StatusBadge status=n.status/></dd>
            <dt>"Kind"</dt><dd>{n.kind.as_str()}</dd>
            <dt>"Duration"</dt><dd>{duration}</dd>
            <dt>"Started"</dt><dd>{format::timestamp(n.start_us)}</dd>
            <dt>"Step"</dt><dd>{n.step.map(|s| s.to_string()).unwrap_or_else(|| "—".into())}</dd>
            <dt>"Rank"</dt><dd>{n.rank.map(|s| s.to_string()).unwrap_or_else(|| "—".into())}</dd>
            <dt>"Children"</dt><dd>{n.child_count}</dd>
            {n.token_count.map(|t| view! { <dt>"Tokens"</dt><dd>{t}</dd> })}
            {d.thread_id.clone().map(|t| view! { <dt>"Thread"</dt><dd>{t}</dd> })}
        </dl>
        <Annotations target=Target {
            run_id: d.run_id.clone(),
            trace_id: d.trace_id.clone(),
            span_id: n.parent_span_id.is_some().then(|| n.span_id.clone()),
        }/>
        {d.error.clone().map(|e| view! { <BodyView label="Error" value=Some(e)/> })}
        <BodyView label="Input" value=d.input.clone() truncated=d.input_truncated chat/>
        <BodyView label="Output" value=d.output.clone() truncated=d.output_truncated chat/>
        <CompareLinks d=d.clone()/>
        <KeyValues label="Attributes" map=d.attributes.clone()/>
        <KeyValues label="Metrics" map=d.metrics.clone()/>
        {(!links.is_empty()).then(|| view! {
            <section>
                <h3>"Links"</h3>
                <ul class="links">
                    {links.into_iter().map(|l| view! {
                        <li><a href=link(&run_id, &l.trace_id, Some(&l.span_id))>{format!("{} / {}", l.trace_id, l.span_id)}</a></li>
                    }).collect_view()}
                </ul>
            </section>
        })}
    }
}

#[component]
fn KeyValues(label: &'static str, map: Map<String, Value>) -> impl IntoView {
    (!map.is_empty()).then(|| {
        view! {
            <section>
                <h3>{label}</h3>
                <table class="kv">
                    <tbody>
                        {map.into_iter().map(|(k, v)| {
                            let text = match v {
                                Value::String(s) => s,
                                other => other.to_string(),
                            };
                            view! { <tr><td>{k}</td><td>{text}</td></tr> }
                        }).collect_view()}
                    </tbody>
                </table>
            </section>
        }
    })
}

/// Ways into the compare page from a span: its children side by side (a GRPO
/// group's samples), and for a root, the same rollout at other steps.
#[component]
fn CompareLinks(d: SpanDetail) -> impl IntoView {
    let n = &d.node;
    let children = (n.child_count >= 2).then(|| {
        let href = children_link(&d.run_id, &d.trace_id, &n.span_id);
        view! { <a class="compare-link" href=href>{format!("Compare its {} children", n.child_count.min(MAX_COLUMNS as i64))}</a> }
    });
    let is_root = n.parent_span_id.is_none();
    let matches: RwSignal<Option<Result<RolloutMatches, ApiError>>> = RwSignal::new(None);
    let (run, trace, span) = (d.run_id.clone(), d.trace_id.clone(), n.span_id.clone());
    let find = {
        let (run, trace) = (run.clone(), trace.clone());
        move |_| {
            let (run, trace) = (run.clone(), trace.clone());
            leptos::task::spawn_local(async move {
                matches.set(Some(api::rollouts(run, trace).await));
            });
        }
    };
    view! {
        <section class="compare-links">
            {children}
            {is_root.then(|| view! {
                <button type="button" class="link-button" on:click=find>"Same rollout at other steps"</button>
            })}
            {move || matches.get().map(|found| match found {
                Err(e) => view! { <p class="error">{e.message}</p> }.into_any(),
                Ok(m) if m.traces.len() < 2 => view! {
                    <p class="muted">{match &m.rollout_id {
                        Some(id) => format!("No other trace of this run has rollout id {id}."),
                        None => "This trace has no rollout id.".to_string(),
                    }}</p>
                }.into_any(),
                Ok(m) => {
                    let here = (trace.clone(), span.clone());
                    let others: Vec<(String, String, Option<i64>)> = m.traces.iter()
                        .filter(|t| t.trace_id != trace)
                        .filter_map(|t| t.root_span_id.clone().map(|r| (t.trace_id.clone(), r, t.step)))
                        .collect();
                    let all: Vec<SpanRef> = m.traces.iter()
                        .filter_map(|t| t.root_span_id.clone().map(|r| (t.trace_id.clone(), r)))
                        .collect();
                    view! {
                        <p>
                            {format!("Rollout {}: ", m.rollout_id.clone().unwrap_or_default())}
                            <a class="compare-link" href=compare_link(&run, &all)>{format!("compare {}", all.len().min(MAX_COLUMNS))}</a>
                        </p>
                        <ul class="rollout-steps">
                            {others.into_iter().map(|(t, r, step)| {
                                let href = compare_link(&run, &[here.clone(), (t, r)]);
                                let label = step.map_or("no step".to_string(), |s| format!("step {s}"));
                                view! { <li><a href=href>{format!("with {label}")}</a></li> }
                            }).collect_view()}
                        </ul>
                    }.into_any()
                }
            })}
        </section>
    }
}
