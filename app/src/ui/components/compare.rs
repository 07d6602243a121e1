//! The pieces of the compare page: a span's column, its lazily opened subtree, one
//! aligned level of a diff, and the body diff of a selected pair.

use leptos::prelude::*;

use crate::ui::client_data::ClientData;
use leptos_router::components::A;
use leptos_router::hooks::use_query_map;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::body::BodyView;
use crate::ui::api::{self, ApiError};
use crate::ui::compare_url::{span_ref, CompareUrl, SpanRef};
use crate::ui::components::status::StatusBadge;
use crate::ui::format;
use crate::ui::url::link;
use treeline_wire::{
    AlignedRow, BodyDiff, Change, DiffTag, JsonChange, SpanDetail, SpanKind, SpanNode,
};

/// One compared span: where it is, and what was read (or why it could not be).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Loaded {
    pub at: SpanRef,
    pub span: Result<SpanDetail, ApiError>,
}

/// The root attribute `key` of a compared span, when it is a number.
pub(crate) fn number(loaded: &Loaded, key: &str) -> Option<f64> {
    loaded.span.as_ref().ok()?.attributes.get(key)?.as_f64()
}

/// Children listed under a column's span before "more not shown".
const SUBTREE_PAGE: usize = 200;

/// A column's place by the ranking attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ranked {
    Best,
    Worst,
    Neither,
}

fn value_text(v: Option<&Value>) -> String {
    match v {
        None => "—".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// One compared span: what it is, its attributes (those that differ across the
/// columns marked), its output, and its subtree on demand.
#[component]
pub fn Column(
    run_id: String,
    loaded: Loaded,
    keys: Vec<String>,
    differ: Vec<String>,
    rank: Ranked,
    by: Option<String>,
    /// What tells this span from the others compared: `sample 2 · reward 1`.
    #[prop(optional)]
    caption: String,
) -> impl IntoView {
    let (trace_id, span_id) = loaded.at.clone();
    let span = match loaded.span {
        Ok(span) => span,
        // Named as missing, never replaced by another span.
        Err(e) => {
            let why = if e.code.ends_with("not_found") {
                format!("missing: span {span_id} is not in trace {trace_id}")
            } else {
                e.message
            };
            return view! { <article class="compare-column missing"><p class="error" role="alert">{why}</p></article> }
                .into_any();
        }
    };
    let n = &span.node;
    let rank_badge = match rank {
        Ranked::Best => Some(("best", "rank best")),
        Ranked::Worst => Some(("worst", "rank worst")),
        Ranked::Neither => None,
    }
    .map(|(label, class)| {
        let by = by.clone().unwrap_or_default();
        view! { <span class=class title=format!("by {by}")>{format!("{label} by {by}")}</span> }
    });
    let score = by
        .as_deref()
        .and_then(|k| {
            number(
                &Loaded {
                    at: loaded.at.clone(),
                    span: Ok(span.clone()),
                },
                k,
            )
        })
        .map(|v| view! { <span class="score">{format!("{v}")}</span> });
    let href = link(&run_id, &trace_id, Some(&span_id));
    let chat = n.kind == SpanKind::Model;
    let rows = keys
        .iter()
        .map(|k| {
            let class = if differ.contains(k) { "differs" } else { "" };
            let text = value_text(span.attributes.get(k));
            view! { <tr class=class><td>{k.clone()}</td><td>{text}</td></tr> }
        })
        .collect_view();
    view! {
        <article class="compare-column" aria-label=n.name.clone()>
            <header>
                <h2 class="name"><a href=href>{n.name.clone()}</a></h2>
                {(!caption.is_empty()).then(|| view! { <p class="distinct">{caption}</p> })}
                <div class="facts">
                    <StatusBadge status=n.status/>
                    <span class="muted">{n.kind.as_str()}</span>
                    <span>{n.duration_us.map(format::duration).unwrap_or_else(|| "running".into())}</span>
                    {n.token_count.map(|t| view! { <span>{format!("{t} tokens")}</span> })}
                    {rank_badge}
                    {score}
                </div>
            </header>
            <table class="kv">
                <tbody>
                    {rows}
                    <NoteRows run_id=run_id.clone() trace_id=trace_id.clone() span_id=span_id.clone()
                        root=n.parent_span_id.is_none()/>
                </tbody>
            </table>
            {span.error.clone().map(|e| view! { <BodyView label="Error" value=Some(e)/> })}
            <BodyView label="Output" value=span.output.clone() truncated=span.output_truncated chat/>
            <Subtree run_id trace_id span_id count=n.child_count/>
        </article>
    }
    .into_any()
}

/// A compared span's annotations (a root's are its trace's), one row a name:
/// `note.label  reward hacking · alice, fine · bob`. Read in the browser.
#[component]
fn NoteRows(run_id: String, trace_id: String, span_id: String, root: bool) -> impl IntoView {
    let notes = ClientData::new(move || api::annotations(run_id.clone(), trace_id.clone()));
    move || {
        let Some(Ok(list)) = notes.get() else {
            return ().into_any();
        };
        let mut rows: Vec<(String, Vec<String>)> = Vec::new();
        for a in list.annotations {
            let here = match &a.span_id {
                Some(s) => *s == span_id,
                None => root,
            };
            if !here {
                continue;
            }
            let said = format!("{} · {}", format::note_value(&a.value), a.author.name);
            match rows.iter_mut().find(|(name, _)| *name == a.name) {
                Some((_, said_all)) => said_all.push(said),
                None => rows.push((a.name, vec![said])),
            }
        }
        rows.into_iter()
            .map(|(name, said)| {
                view! { <tr class="note-row"><td>{format!("note.{name}")}</td><td>{said.join(", ")}</td></tr> }
            })
            .collect_view()
            .into_any()
    }
}

/// One fetched level of a subtree: its spans, and whether more were left out.
type Level = (Vec<SpanNode>, bool);

/// A span's children, fetched the first time they are opened.
#[component]
fn Subtree(run_id: String, trace_id: String, span_id: String, count: i64) -> impl IntoView {
    let open = RwSignal::new(false);
    let children: RwSignal<Option<Result<Level, ApiError>>> = RwSignal::new(None);
    let (run, trace, span) = (run_id.clone(), trace_id.clone(), span_id.clone());
    let toggle = move |_| {
        open.update(|o| *o = !*o);
        if children.with_untracked(Option::is_none) {
            let (run, trace, span) = (run.clone(), trace.clone(), span.clone());
            leptos::task::spawn_local(async move {
                let page = api::span_page(run, trace, Some(span), None, SUBTREE_PAGE).await;
                children.set(Some(page.map(|p| (p.spans, p.next_cursor.is_some()))));
            });
        }
    };
    (count > 0).then(|| {
        view! {
            <div class="subtree">
                <button type="button" class="toggle-children" aria-expanded=move || open.get().to_string() on:click=toggle>
                    {move || format!("{} {}", if open.get() { "▾" } else { "▸" }, format::children(count))}
                </button>
                {move || open.get().then(|| match children.get() {
                    None => view! { <p class="loading">"Loading…"</p> }.into_any(),
                    Some(Err(e)) => view! { <p class="error">{e.message}</p> }.into_any(),
                    Some(Ok((nodes, more))) => view! {
                        <ul>
                            {nodes.into_iter().map(|c| {
                                let (run, trace) = (run_id.clone(), trace_id.clone());
                                view! {
                                    <li>
                                        <StatusBadge status=c.status/>
                                        " "<span>{c.name.clone()}</span>
                                        " "<span class="muted">{c.duration_us.map(format::duration).unwrap_or_else(|| "running".into())}</span>
                                        <Subtree run_id=run trace_id=trace span_id=c.span_id.clone() count=c.child_count/>
                                    </li>
                                }.into_any()
                            }).collect_view()}
                        </ul>
                        {more.then(|| view! { <p class="muted">{format!("only the first {SUBTREE_PAGE} are shown")}</p> })}
                    }.into_any(),
                })}
            </div>
        }
    })
}

fn change_label(change: Change) -> &'static str {
    match change {
        Change::Same => "same",
        Change::Changed => "changed",
        Change::OnlyA => "only in A",
        Change::OnlyB => "only in B",
    }
}

fn side(node: &Option<SpanNode>) -> AnyView {
    match node {
        None => view! { <div class="side empty-side">"—"</div> }.into_any(),
        Some(n) => view! {
            <div class="side">
                <StatusBadge status=n.status/>
                " "<span class="name">{n.name.clone()}</span>
                " "<span class="muted">{n.kind.as_str()}</span>
                " "<span class="muted">{n.duration_us.map(format::duration).unwrap_or_else(|| "running".into())}</span>
            </div>
        }
        .into_any(),
    }
}

/// The children of A's span and B's span, aligned; a pair opens to its own children
/// and selects its bodies for the diff below, through the URL.
#[component]
pub fn AlignedLevel(run_id: String, a: SpanRef, b: SpanRef) -> impl IntoView {
    let query = use_query_map();
    let url = Memo::new(move |_| CompareUrl::from_query(&query.read()));
    let (a_key, b_key) = (format!("{}:{}", a.0, a.1), format!("{}:{}", b.0, b.1));
    let rows = Resource::new(move || (), {
        let run = run_id.clone();
        move |_| api::align(run.clone(), a_key.clone(), b_key.clone())
    });
    view! {
        <Suspense fallback=|| view! { <p class="loading">"Aligning…"</p> }>
            {move || {
                let (run_id, a, b) = (run_id.clone(), a.clone(), b.clone());
                Suspend::new(async move {
                    match rows.await {
                        Err(e) => view! { <p class="error" role="alert">{e.message}</p> }.into_any(),
                        Ok(alignment) if alignment.rows.is_empty() => {
                            view! { <p class="muted">"Neither span has children."</p> }.into_any()
                        }
                        Ok(alignment) => view! {
                            <ol class="aligned">
                                {alignment.rows.into_iter().map(|row| aligned_row(&run_id, &a, &b, row, url)).collect_view()}
                            </ol>
                            {alignment.truncated.then(|| view! { <p class="muted">"Only the first 10,000 children of each side are aligned."</p> })}
                        }.into_any(),
                    }
                })
            }}
        </Suspense>
    }
}

fn aligned_row(
    run_id: &str,
    a: &SpanRef,
    b: &SpanRef,
    row: AlignedRow,
    url: Memo<CompareUrl>,
) -> AnyView {
    let change = row.change;
    let class = format!("aligned-row {}", change_label(change).replace(' ', "-"));
    let differences = row.differences.join(", ");
    let pair = match (&row.a, &row.b) {
        (Some(x), Some(y)) => Some((x.clone(), y.clone())),
        _ => None,
    };
    let left = side(&row.a);
    let right = side(&row.b);
    let Some((x, y)) = pair else {
        return view! {
            <li class=class>{left}<div class="change">{change_label(change)}</div>{right}</li>
        }
        .into_any();
    };
    let open_key = format!("{}:{}", x.span_id, y.span_id);
    let pair_key = format!("{}:{}:{}:{}", a.0, x.span_id, b.0, y.span_id);
    let has_children = x.child_count > 0 || y.child_count > 0;
    let open = {
        let key = open_key.clone();
        Memo::new(move |_| url.with(|u| u.open.contains(&key)))
    };
    let toggle_href = {
        let key = open_key.clone();
        move || url.with(|u| u.toggled(&key).href())
    };
    let select_href = {
        let key = pair_key.clone();
        move || {
            url.with(|u| {
                CompareUrl {
                    pair: Some(key.clone()),
                    ..u.clone()
                }
                .href()
            })
        }
    };
    let selected = {
        let key = pair_key.clone();
        move || url.with(|u| u.pair.as_deref() == Some(key.as_str()))
    };
    let (run, next_a, next_b) = (
        run_id.to_string(),
        (a.0.clone(), x.span_id.clone()),
        (b.0.clone(), y.span_id.clone()),
    );
    view! {
        <li class=class>
            {left}
            <div class="change">
                <span class="change-label">{change_label(change)}</span>
                {(!differences.is_empty()).then(|| view! { <span class="differences">{differences.clone()}</span> })}
                <A href=select_href scroll=false attr:aria-current=move || selected().then_some("true")>"bodies"</A>
                {has_children.then(|| view! {
                    <A href=toggle_href scroll=false attr:aria-expanded=move || open.get().to_string()>
                        {move || if open.get() { "▾ children" } else { "▸ children" }}
                    </A>
                })}
            </div>
            {right}
            {move || open.get().then(|| view! {
                <div class="nested"><AlignedLevel run_id=run.clone() a=next_a.clone() b=next_b.clone()/></div>
            })}
        </li>
    }
    .into_any()
}

/// `A_TRACE:A_SPAN:B_TRACE:B_SPAN` as the API's two sides.
fn pair_sides(pair: &str) -> Option<(String, String)> {
    match pair.split(':').collect::<Vec<_>>().as_slice() {
        [ta, sa, tb, sb] => {
            let a = span_ref(&format!("{ta}:{sa}"))?;
            let b = span_ref(&format!("{tb}:{sb}"))?;
            Some((format!("{}:{}", a.0, a.1), format!("{}:{}", b.0, b.1)))
        }
        _ => None,
    }
}

/// The selected pair's attributes and bodies, diffed on the server; it follows the
/// pair in the URL.
#[component]
pub fn BodyDiffView(run_id: String, pair: Memo<String>) -> impl IntoView {
    let diff = Resource::new(
        move || pair.get(),
        move |pair| {
            let run = run_id.clone();
            async move {
                match pair_sides(&pair) {
                    Some((a, b)) => api::diff(run, a, b).await,
                    None => Err(ApiError::other(
                        "the selected pair in this link is malformed",
                    )),
                }
            }
        },
    );
    view! {
        <section class="body-diff" aria-label="Body diff">
            <h2>"Bodies"</h2>
            <Transition fallback=|| view! { <p class="loading">"Comparing…"</p> }>
                {move || Suspend::new(async move {
                    match diff.await {
                        Err(e) => view! { <p class="error" role="alert">{e.message}</p> }.into_any(),
                        Ok(d) => view! {
                            {(!d.attributes.is_empty()).then(|| view! {
                                <h3>"Attributes"</h3>
                                {changes_table(d.attributes.clone())}
                            })}
                            {d.bodies.into_iter().map(body_view).collect_view()}
                        }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

fn changes_table(changes: Vec<JsonChange>) -> impl IntoView {
    view! {
        <table class="kv changes">
            <thead><tr><th>"path"</th><th>"A"</th><th>"B"</th></tr></thead>
            <tbody>
                {changes.into_iter().map(|c| view! {
                    <tr><td><code>{c.path}</code></td><td>{value_text(c.a.as_ref())}</td><td>{value_text(c.b.as_ref())}</td></tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}

fn body_view(d: BodyDiff) -> AnyView {
    let cut = d
        .cut
        .then(|| view! { <span class="note">"cut: only the start was compared"</span> });
    if d.same {
        return view! { <h3>{d.body}<span class="note">"the same"</span></h3> }.into_any();
    }
    let content = if d.mode == "json" {
        changes_table(d.changes).into_any()
    } else {
        view! {
            <pre class="text-diff">
                {d.text.into_iter().map(|p| {
                    let class = match p.tag {
                        DiffTag::Equal => "eq",
                        DiffTag::Delete => "del",
                        DiffTag::Insert => "ins",
                    };
                    view! { <span class=class>{p.text}</span> }
                }).collect_view()}
            </pre>
        }
        .into_any()
    };
    view! { <h3>{d.body}{cut}</h3>{content} }.into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_change_reads_as_words() {
        assert_eq!(change_label(Change::OnlyB), "only in B");
        assert_eq!(value_text(None), "—");
        assert_eq!(value_text(Some(&Value::from("x"))), "x");
    }
}
