//! `/compare`: spans side by side (2 to 8), each with its status, size, attributes
//! and output, the best and worst marked by a chosen attribute; or, for two, a diff
//! aligned level by level with the selected pair's bodies compared. All of it is in
//! the URL ([`CompareUrl`]).

use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_query_map;

use crate::ui::api::{self, ApiError};
use crate::ui::compare_url::{CompareUrl, SpanRef, MAX_COLUMNS};
use crate::ui::components::compare::{number, AlignedLevel, BodyDiffView, Column, Loaded, Ranked};
use crate::ui::components::status::StatusBadge;
use crate::ui::distinct;
use crate::ui::url::link;
use treeline_wire::query::ListQuery;
use treeline_wire::SpanDetail;

/// The spans a link names: given, a parent's children, or a step's trace roots.
async fn resolve(url: CompareUrl) -> Result<Vec<SpanRef>, ApiError> {
    let run = url
        .run_id
        .clone()
        .ok_or_else(|| ApiError::other("this link names no run (run_id)"))?;
    if !url.spans.is_empty() {
        return Ok(url.spans);
    }
    if let Some((trace, span)) = url.parent {
        let page = api::span_page(run, trace.clone(), Some(span), None, MAX_COLUMNS).await?;
        return Ok(page
            .spans
            .into_iter()
            .map(|s| (trace.clone(), s.span_id))
            .collect());
    }
    if let Some(step) = url.step {
        let one_step = ListQuery {
            min_step: Some(step),
            max_step: Some(step),
            limit: Some(MAX_COLUMNS),
            ..ListQuery::default()
        };
        let list = api::traces(Some(run), one_step).await?;
        return Ok(list
            .traces
            .into_iter()
            .filter_map(|t| t.root_span_id.map(|root| (t.trace_id, root)))
            .collect());
    }
    Err(ApiError::other(
        "this link names nothing to compare: give spans, a parent or a step",
    ))
}

async fn load(url: CompareUrl) -> Result<Vec<Loaded>, ApiError> {
    let run = url.run_id.clone().unwrap_or_default();
    let mut loaded = Vec::new();
    for at in resolve(url).await? {
        let span = api::span(run.clone(), at.0.clone(), at.1.clone()).await;
        loaded.push(Loaded { at, span });
    }
    Ok(loaded)
}

#[component]
pub fn ComparePage() -> impl IntoView {
    let query = use_query_map();
    let url = Memo::new(move |_| CompareUrl::from_query(&query.read()));
    // Reloaded when the compared spans change, not when a level opens.
    let which = Memo::new(move |_| {
        let u = url.get();
        CompareUrl {
            by: None,
            order: None,
            diff: false,
            open: Vec::new(),
            pair: None,
            ..u
        }
    });
    let spans = Resource::new(move || which.get(), load);
    view! {
        <section class="compare">
            <h1>"Compare"</h1>
            <Suspense fallback=|| view! { <p class="loading">"Loading the spans…"</p> }>
                {move || Suspend::new(async move {
                    match spans.await {
                        Err(e) => view! { <p class="error" role="alert">{e.message}</p> }.into_any(),
                        Ok(loaded) if loaded.len() < 2 => view! {
                            <p class="empty">"A comparison needs at least two spans; this link names "{loaded.len()}"."</p>
                        }.into_any(),
                        Ok(loaded) => view! { <Comparison url loaded/> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

/// The toolbar and either the columns or, for two spans in diff mode, the diff.
#[component]
fn Comparison(url: Memo<CompareUrl>, loaded: Vec<Loaded>) -> impl IntoView {
    let run_id = url.get_untracked().run_id.unwrap_or_default();
    let refs: Vec<SpanRef> = loaded.iter().map(|l| l.at.clone()).collect();
    let numeric = numeric_keys(&loaded);
    // Only a change of mode redraws the page: opening a level or picking a pair
    // changes the URL, and the parts that show them follow it themselves.
    let two = loaded.len() == 2;
    let diffing = Memo::new(move |_| two && url.with(|u| u.diff));
    view! {
        <CompareBar url refs numeric/>
        {move || {
            if diffing.get() {
                diff_view(url, &loaded, &run_id).into_any()
            } else {
                let (loaded, run_id) = (loaded.clone(), run_id.clone());
                (move || url.with(|u| columns_view(u, &loaded, &run_id))).into_any()
            }
        }}
    }
}

/// Ranking, ordering and switching between columns and diff, all as links.
#[component]
fn CompareBar(url: Memo<CompareUrl>, refs: Vec<SpanRef>, numeric: Vec<String>) -> impl IntoView {
    let two = refs.len() == 2;
    let link_with = move |change: &dyn Fn(&mut CompareUrl)| {
        let mut next = url.get().with_spans(refs.clone());
        change(&mut next);
        next.href()
    };
    let link_with = StoredValue::new(link_with);
    let rank_links = numeric
        .into_iter()
        .map(|key| {
            let href = {
                let key = key.clone();
                move || link_with.with_value(|l| l(&|u: &mut CompareUrl| u.by = Some(key.clone())))
            };
            let current = {
                let key = key.clone();
                move || url.get().by.as_deref() == Some(key.as_str())
            };
            view! { <A href=href scroll=false attr:aria-current=move || current().then_some("true")>{key}</A> }
        })
        .collect_view();
    view! {
        <nav class="compare-bar" aria-label="Comparison">
            <span class="muted">"Rank by"</span>
            {rank_links}
            <span class="sep"></span>
            {move || url.get().by.is_some().then(|| view! {
                <A href=move || link_with.with_value(|l| l(&|u: &mut CompareUrl| u.order = Some("desc".into()))) scroll=false>"best first"</A>
                <A href=move || link_with.with_value(|l| l(&|u: &mut CompareUrl| u.order = Some("asc".into()))) scroll=false>"worst first"</A>
                <A href=move || link_with.with_value(|l| l(&|u: &mut CompareUrl| u.order = None)) scroll=false>"as given"</A>
            })}
            {two.then(|| view! {
                <span class="sep"></span>
                {move || if url.get().diff {
                    view! { <A href=move || link_with.with_value(|l| l(&|u: &mut CompareUrl| u.diff = false)) scroll=false>"Side by side"</A> }.into_any()
                } else {
                    view! { <A href=move || link_with.with_value(|l| l(&|u: &mut CompareUrl| u.diff = true)) scroll=false>"Diff these two"</A> }.into_any()
                }}
            })}
        </nav>
    }
}

/// The attributes holding a number in some column, in the order first seen.
fn numeric_keys(loaded: &[Loaded]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for l in loaded {
        if let Ok(span) = &l.span {
            for (k, v) in &span.attributes {
                if v.is_number() && !keys.contains(k) {
                    keys.push(k.clone());
                }
            }
        }
    }
    keys
}

/// Every attribute name among the columns, in the order first seen.
fn attribute_keys(loaded: &[Loaded]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for span in loaded.iter().filter_map(|l| l.span.as_ref().ok()) {
        for k in span.attributes.keys() {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    keys
}

/// The names whose values are not the same in every column (absent counts as a value).
fn differing(loaded: &[Loaded], keys: &[String]) -> Vec<String> {
    let spans: Vec<&SpanDetail> = loaded.iter().filter_map(|l| l.span.as_ref().ok()).collect();
    keys.iter()
        .filter(|k| {
            let first = spans.first().and_then(|s| s.attributes.get(k.as_str()));
            spans.iter().any(|s| s.attributes.get(k.as_str()) != first)
        })
        .cloned()
        .collect()
}

/// Which columns hold the highest and the lowest value; none when all are equal.
pub(crate) fn best_and_worst(values: &[Option<f64>]) -> (Option<usize>, Option<usize>) {
    let known: Vec<(usize, f64)> = values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.map(|v| (i, v)))
        .collect();
    let best = known
        .iter()
        .copied()
        .reduce(|a, b| if b.1 > a.1 { b } else { a });
    let worst = known
        .iter()
        .copied()
        .reduce(|a, b| if b.1 < a.1 { b } else { a });
    match (best, worst) {
        (Some(b), Some(w)) if b.1 > w.1 => (Some(b.0), Some(w.0)),
        _ => (None, None),
    }
}

fn columns_view(u: &CompareUrl, loaded: &[Loaded], run_id: &str) -> impl IntoView {
    let values: Vec<Option<f64>> = loaded
        .iter()
        .map(|l| u.by.as_deref().and_then(|k| number(l, k)))
        .collect();
    let (best, worst) = best_and_worst(&values);
    let mut order: Vec<usize> = (0..loaded.len()).collect();
    if let Some(dir) = u.order.as_deref().filter(|_| u.by.is_some()) {
        // Columns without the value go last either way.
        order.sort_by(|&x, &y| {
            let key = |i: usize| values[i].map(|v| if dir == "asc" { v } else { -v });
            match (key(x), key(y)) {
                (Some(a), Some(b)) => a.total_cmp(&b),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            }
        });
    }
    let keys = attribute_keys(loaded);
    let differ = differing(loaded, &keys);
    let captions = captions(loaded);
    let style = format!(
        "grid-template-columns: repeat({}, minmax(240px, 1fr));",
        loaded.len()
    );
    view! {
        <div class="compare-columns" style=style>
            {order.into_iter().map(|i| {
                let rank = if Some(i) == best {
                    Ranked::Best
                } else if Some(i) == worst {
                    Ranked::Worst
                } else {
                    Ranked::Neither
                };
                view! {
                    <Column run_id=run_id.to_string() loaded=loaded[i].clone() keys=keys.clone()
                        differ=differ.clone() rank by=u.by.clone() caption=captions[i].clone()/>
                }
            }).collect_view()}
        </div>
    }
}

fn diff_view(url: Memo<CompareUrl>, loaded: &[Loaded], run_id: &str) -> impl IntoView {
    let (a, b) = (&loaded[0], &loaded[1]);
    // The compared spans themselves until a pair is picked.
    let first = format!("{}:{}:{}:{}", a.at.0, a.at.1, b.at.0, b.at.1);
    let pair = Memo::new(move |_| {
        url.with(|u| u.pair.clone())
            .unwrap_or_else(|| first.clone())
    });
    let name = |l: &Loaded| match &l.span {
        Ok(s) => s.node.name.clone(),
        Err(_) => format!("missing: span {} in trace {}", l.at.1, l.at.0),
    };
    let captions = captions(loaded);
    let head = |l: &Loaded, side: &'static str, caption: String| {
        let status = l.span.as_ref().ok().map(|s| s.node.status);
        let href = link(run_id, &l.at.0, Some(&l.at.1));
        view! {
            <div class="side">
                <span class="side-tag" title=format!("side {side} of the diff")>{side}</span>
                {status.map(|s| view! { <StatusBadge status=s/> })}
                <a href=href>{name(l)}</a>
                {(!caption.is_empty()).then(|| view! { <span class="distinct">{caption}</span> })}
            </div>
        }
    };
    let both = a.span.is_ok() && b.span.is_ok();
    view! {
        <div class="diff">
            <div class="diff-head">
                {head(a, "A", captions[0].clone())}
                <div class="change">"A ⟷ B"</div>
                {head(b, "B", captions[1].clone())}
            </div>
            {both.then(|| view! {
                <AlignedLevel run_id=run_id.to_string() a=a.at.clone() b=b.at.clone()/>
            })}
            <BodyDiffView run_id=run_id.to_string() pair/>
        </div>
    }
}

/// Each span's caption: the attributes the compared spans differ on (at most two),
/// so columns of spans that share a name read apart. Empty for a missing span.
fn captions(loaded: &[Loaded]) -> Vec<String> {
    let found = || loaded.iter().filter_map(|l| l.span.as_ref().ok());
    let keys = distinct::keys(found().map(|s| &s.attributes), 2);
    loaded
        .iter()
        .map(|l| match &l.span {
            Ok(s) if !keys.is_empty() => distinct::caption(&s.attributes, &keys),
            _ => String::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_and_worst_need_two_different_values() {
        assert_eq!(
            best_and_worst(&[Some(1.0), None, Some(0.0), Some(1.0)]),
            (Some(0), Some(2))
        );
        assert_eq!(best_and_worst(&[Some(0.5), Some(0.5)]), (None, None));
        assert_eq!(best_and_worst(&[None, Some(2.0)]), (None, None));
    }

    #[test]
    fn attributes_that_differ_are_found_across_columns() {
        let mut loaded = Vec::new();
        for (reward, model) in [(1.0, "m"), (0.0, "m")] {
            let mut span: SpanDetail = serde_json::from_value(serde_json::json!({
                "span_id": "s", "parent_span_id": null, "name": "n", "kind": "agent",
                "status": "ok", "start_us": 0, "end_us": 1, "duration_us": 1, "step": null,
                "rank": null, "child_count": 0, "error_count": 0, "token_count": null,
                "orphan": false, "run_id": "r", "trace_id": "t", "thread_id": null,
                "attributes": {}, "metrics": {}, "links": [], "input": null, "output": null,
                "error": null, "input_truncated": false, "output_truncated": false, "path": []
            }))
            .expect("a span");
            span.attributes
                .insert("reward".into(), serde_json::Value::from(reward));
            span.attributes
                .insert("model".into(), serde_json::Value::from(model));
            loaded.push(Loaded {
                at: ("t".into(), "s".into()),
                span: Ok(span),
            });
        }
        loaded.push(Loaded {
            at: ("t".into(), "gone".into()),
            span: Err(ApiError::other("missing")),
        });
        let keys = attribute_keys(&loaded);
        assert_eq!(keys, ["reward", "model"]);
        assert_eq!(differing(&loaded, &keys), ["reward"]);
        assert_eq!(numeric_keys(&loaded), ["reward"]);
        assert_eq!(number(&loaded[0], "reward"), Some(1.0));
    }
}
