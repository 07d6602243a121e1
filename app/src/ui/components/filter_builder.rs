//! The workspace's second filter row: "failed beneath", the trace filters as
//! removable chips with a builder for more, the list's order, and the root
//! attributes pinned as columns. Everything goes through the URL.

use leptos::prelude::*;
use treeline_wire::filter::{
    AttributeKey, AttributeKeys, Total, TraceFilter, ATTR_PREFIX, MAX_FILTERS, NOTE_PREFIX,
    SPAN_PREFIX,
};

use crate::ui::api;
use crate::ui::components::early_input;
use crate::ui::url::WorkspaceUrl;

/// The "failed beneath" switch: a trace whose root did not fail but a span beneath
/// it did. It is this filter with the Status picker at `ok`, and reads as on only
/// while both hold (picking another status turns it off; the filter stays a chip).
pub(crate) const FAILED_BENEATH: &str = "error_count > 0";
const ROOT_OK: &str = "ok";

/// Whether the URL lists failures beneath a root that did not fail.
pub(crate) fn failed_beneath(u: &WorkspaceUrl) -> bool {
    u.status.as_deref() == Some(ROOT_OK) && u.filters.iter().any(|f| f == FAILED_BENEATH)
}

/// The URL with the "failed beneath" switch turned on or off.
pub(crate) fn set_failed_beneath(u: &mut WorkspaceUrl, on: bool) {
    u.filters.retain(|f| f != FAILED_BENEATH);
    if on {
        u.filters.push(FAILED_BENEATH.to_string());
        u.status = Some(ROOT_OK.to_string());
    } else if u.status.as_deref() == Some(ROOT_OK) {
        u.status = None;
    }
}

/// The span fields the builder offers, with their labels.
const SPAN_FIELDS: [(&str, &str); 4] = [
    ("span.name", "span name"),
    ("span.kind", "span kind"),
    ("span.status", "span status"),
    ("span.error_type", "span error type"),
];
/// The builder's "span attribute" field, whose name is typed in a box of its own.
const SPAN_ATTR: &str = "span.attr.";
const OPERATORS: [&str; 7] = ["=", "!=", "<", "<=", ">", ">=", "exists"];
const SORTS: [(&str, &str); 6] = [
    ("updated", "last update"),
    ("duration", "duration"),
    ("spans", "spans"),
    ("tokens", "tokens"),
    ("errors", "failed spans"),
    ("iterations", "iterations"),
];

/// The URL with the list's parameters changed, and the selection dropped (it may
/// no longer be in the list).
fn relisted(u: WorkspaceUrl, change: impl FnOnce(&mut WorkspaceUrl)) -> WorkspaceUrl {
    let mut next = WorkspaceUrl {
        trace_id: None,
        span_id: None,
        ..u
    };
    change(&mut next);
    next
}

/// The expression the builder's three inputs make, or what is wrong with it.
pub(crate) fn expression(field: &str, op: &str, value: &str) -> Result<String, String> {
    let value = value.trim();
    let text = if op == "exists" {
        format!("{field} exists")
    } else if value.contains(char::is_whitespace) && !value.starts_with('"') {
        format!(
            "{field} {op} \"{}\"",
            value.replace('\\', "\\\\").replace('"', "\\\"")
        )
    } else {
        format!("{field} {op} {value}")
    };
    TraceFilter::parse(&text)
        .map(|f| f.to_string())
        .map_err(|e| e.message)
}

#[component]
pub fn FilterBar(url: Memo<WorkspaceUrl>, go_to: Callback<WorkspaceUrl>) -> impl IntoView {
    let run_id = Memo::new(move |_| url.get().run_id);
    let keys = Resource::new(
        move || run_id.get(),
        |run| async move {
            match run {
                Some(run) => api::attribute_keys(run).await.unwrap_or_default(),
                None => AttributeKeys::default(),
            }
        },
    );
    let failed_beneath = move || failed_beneath(&url.get());
    let toggle_failed = move |ev: leptos::ev::Event| {
        let on = event_target_checked(&ev);
        go_to.run(relisted(url.get_untracked(), |u| set_failed_beneath(u, on)));
    };
    let remove = move |expr: String| {
        go_to.run(relisted(url.get_untracked(), |u| {
            u.filters.retain(|f| *f != expr)
        }));
    };
    view! {
        <div class="filter-bar">
            <label class="beneath" title="Traces whose root did not fail, with a failed span beneath it: sets Status to ok and adds the filter error_count > 0">
                <input type="checkbox" prop:checked=failed_beneath on:change=toggle_failed/>
                "Failed beneath"
            </label>
            <ul class="chips" aria-label="Filters">
                <For each=move || url.get().filters key=|f| f.clone() let:expr>
                    <li class="chip">
                        <code>{expr.clone()}</code>
                        <button type="button" aria-label=format!("Remove filter {expr}")
                            on:click={
                                let expr = expr.clone();
                                move |_| remove(expr.clone())
                            }>"×"</button>
                    </li>
                </For>
            </ul>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let AttributeKeys { attributes: keys, notes, span_attributes } = keys.await;
                    view! {
                        <Builder url go_to keys=keys.clone() notes=notes.clone() span_keys=span_attributes/>
                        <Order url go_to keys=keys.clone() notes/>
                        <Columns url go_to keys/>
                    }
                })}
            </Transition>
        </div>
    }
}

/// A field, an operator and a value, added as one more filter.
#[component]
fn Builder(
    url: Memo<WorkspaceUrl>,
    go_to: Callback<WorkspaceUrl>,
    keys: Vec<AttributeKey>,
    /// The run's annotation names, for `note.NAME`.
    notes: Vec<AttributeKey>,
    /// A sample of its spans' attribute keys, for `span.attr.NAME`.
    span_keys: Vec<AttributeKey>,
) -> impl IntoView {
    let field = RwSignal::new(Total::Errors.name().to_string());
    let op = RwSignal::new(">".to_string());
    let value = RwSignal::new(String::new());
    let span_attr = RwSignal::new(String::new());
    let problem = RwSignal::new(None::<String>);
    early_input::keep(r#"form.builder select[aria-label="Filter field"]"#, field);
    early_input::keep(r#"form.builder select[aria-label="Filter operator"]"#, op);
    early_input::keep(r#"form.builder input[aria-label="Filter value"]"#, value);
    early_input::keep(
        r#"form.builder input[aria-label="Span attribute name"]"#,
        span_attr,
    );
    let naming = move || field.get() == SPAN_ATTR;
    let keys = StoredValue::new(keys);
    let notes = StoredValue::new(notes);
    // Each name once, though a name with values of two types has two keys.
    let mut span_names: Vec<String> = span_keys.iter().map(|k| k.key.clone()).collect();
    span_names.sort_unstable();
    span_names.dedup();
    let span_keys = StoredValue::new(span_keys);
    // What the value box suggests: a number key's range, a string key's values.
    let chosen = move || {
        if naming() {
            let name = span_attr.get();
            return span_keys.with_value(|ks| ks.iter().find(|k| k.key == name.trim()).cloned());
        }
        let f = field.get();
        let find = |ks: &Vec<AttributeKey>, prefix: &str| {
            ks.iter()
                .find(|k| f.strip_prefix(prefix) == Some(k.key.as_str()))
                .cloned()
        };
        keys.with_value(|ks| find(ks, ATTR_PREFIX))
            .or_else(|| notes.with_value(|ns| find(ns, NOTE_PREFIX)))
    };
    let hint = move || match chosen() {
        None => match field.get().as_str() {
            // Short enough to read in the box; a wrong word gets the whole list.
            "span.kind" => "model, tool …".into(),
            "span.status" => "ok, error …".into(),
            "span.name" => "a name".into(),
            "span.error_type" => "a type".into(),
            SPAN_ATTR => "a value".into(),
            _ => "a number".into(),
        },
        Some(k) if k.kind == "number" => match (k.min, k.max) {
            (Some(lo), Some(hi)) => format!("{lo} to {hi}"),
            _ => "a number".into(),
        },
        Some(k) if k.kind == "boolean" => "true or false".into(),
        Some(_) => "text".into(),
    };
    let add = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let current = url.get_untracked();
        if current.filters.len() >= MAX_FILTERS {
            problem.set(Some(format!("at most {MAX_FILTERS} filters")));
            return;
        }
        // An empty name is the grammar's to name ("span.attr. needs an attribute name").
        let mut chosen = field.get_untracked();
        if chosen == SPAN_ATTR {
            chosen.push_str(span_attr.get_untracked().trim());
        }
        match expression(&chosen, &op.get_untracked(), &value.get_untracked()) {
            Ok(expr) => {
                problem.set(None);
                value.set(String::new());
                go_to.run(relisted(current, |u| {
                    if !u.filters.contains(&expr) {
                        u.filters.push(expr);
                    }
                }));
            }
            Err(message) => problem.set(Some(message)),
        }
    };
    view! {
        <form class="builder" on:submit=add aria-label="Add a filter">
            <select aria-label="Filter field" on:change=move |ev| {
                let chosen = event_target_value(&ev);
                // A span field is text, which is mostly tested for being equal.
                if chosen.starts_with(SPAN_PREFIX) {
                    op.set("=".into());
                }
                field.set(chosen);
            }>
                <optgroup label="Trace totals">
                    {Total::ALL.map(|t| view! {
                        <option value=t.name() selected=move || field.get() == t.name()>{t.name()}</option>
                    }).collect_view()}
                </optgroup>
                <optgroup label="Root attributes">
                    {keys.get_value().into_iter().map(|k| {
                        let name = format!("attr.{}", k.key);
                        let label = format!("{} ({}, {} traces)", k.key, k.kind, k.traces);
                        view! { <option value=name.clone()>{label}</option> }
                    }).collect_view()}
                </optgroup>
                {(!notes.with_value(Vec::is_empty)).then(|| view! {
                    // A trace with such an annotation, on it or on a span, by anyone.
                    <optgroup label="Annotations">
                        {notes.get_value().into_iter().map(|k| {
                            let name = format!("{NOTE_PREFIX}{}", k.key);
                            let label = format!("{} ({}, {} traces)", k.key, k.kind, k.traces);
                            view! { <option value=name.clone()>{label}</option> }
                        }).collect_view()}
                    </optgroup>
                })}
                // A trace that holds such a span; all span filters hold on one span.
                <optgroup label="Any span">
                    {SPAN_FIELDS.map(|(name, label)| view! {
                        <option value=name selected=move || field.get() == name>{label}</option>
                    }).collect_view()}
                    <option value=SPAN_ATTR selected=naming>"span attribute …"</option>
                </optgroup>
            </select>
            <input type="text" class="span-attr" aria-label="Span attribute name"
                placeholder="attribute name" list="span-attribute-names"
                hidden=move || !naming()
                prop:value=move || span_attr.get()
                on:input=move |ev| span_attr.set(event_target_value(&ev))/>
            // Names seen on a sample of the run's spans.
            <datalist id="span-attribute-names">
                {span_names.into_iter().map(|name| view! { <option value=name/> }).collect_view()}
            </datalist>
            <select aria-label="Filter operator" on:change=move |ev| op.set(event_target_value(&ev))>
                {OPERATORS.map(|o| view! { <option value=o selected=move || op.get() == o>{o}</option> }).collect_view()}
            </select>
            <input type="text" aria-label="Filter value" list="filter-values"
                placeholder=hint
                disabled=move || op.get() == "exists"
                prop:value=move || value.get()
                on:input=move |ev| value.set(event_target_value(&ev))/>
            <datalist id="filter-values">
                {move || chosen().map(|k| k.values.into_iter().map(|v| view! {
                    <option value=v.value.clone()>{format!("{} traces", v.traces)}</option>
                }).collect_view())}
            </datalist>
            <button type="submit">"Add filter"</button>
            {move || problem.get().map(|p| view! { <span class="problem" role="alert">{p}</span> })}
        </form>
    }
}

/// The list's order: a total, a numeric root attribute or a number or boolean
/// annotation, either way.
#[component]
fn Order(
    url: Memo<WorkspaceUrl>,
    go_to: Callback<WorkspaceUrl>,
    keys: Vec<AttributeKey>,
    notes: Vec<AttributeKey>,
) -> impl IntoView {
    let numeric = keys
        .into_iter()
        .filter(|k| k.kind == "number")
        .map(|k| (format!("{ATTR_PREFIX}{}", k.key), k.key));
    let scores = notes.into_iter().filter(|k| k.kind != "string").map(|k| {
        let field = format!("{NOTE_PREFIX}{}", k.key);
        (field.clone(), field)
    });
    let ranked: Vec<(String, String)> = numeric.chain(scores).collect();
    let sort = move || url.get().sort.unwrap_or_else(|| "updated".into());
    let set_sort = move |ev: leptos::ev::Event| {
        let v = event_target_value(&ev);
        go_to.run(relisted(url.get_untracked(), |u| {
            u.sort = (v != "updated").then_some(v);
        }));
    };
    let set_order = move |ev: leptos::ev::Event| {
        let v = event_target_value(&ev);
        go_to.run(relisted(url.get_untracked(), |u| {
            u.order = (v == "asc").then_some(v);
        }));
    };
    view! {
        <label>
            "Sort by"
            <select on:change=set_sort>
                {SORTS.map(|(value, label)| view! {
                    <option value=value selected=move || sort() == value>{label}</option>
                }).collect_view()}
                {ranked.into_iter().map(|(value, label)| {
                    let v = value.clone();
                    view! { <option value=value selected=move || sort() == v>{label}</option> }
                }).collect_view()}
            </select>
        </label>
        <select aria-label="Sort order" on:change=set_order>
            <option value="desc" selected=move || url.get().order.is_none()>"high to low"</option>
            <option value="asc" selected=move || url.get().order.as_deref() == Some("asc")>"low to high"</option>
        </select>
    }
}

/// Root attributes shown as columns in every trace row (reward, say).
#[component]
fn Columns(
    url: Memo<WorkspaceUrl>,
    go_to: Callback<WorkspaceUrl>,
    keys: Vec<AttributeKey>,
) -> impl IntoView {
    let mut names: Vec<String> = keys.into_iter().map(|k| k.key).collect();
    names.dedup();
    if names.is_empty() {
        return None;
    }
    let pin = move |key: String, on: bool| {
        go_to.run(WorkspaceUrl {
            cols: {
                let mut cols = url.get_untracked().columns();
                cols.retain(|c| *c != key);
                if on {
                    cols.push(key);
                }
                (!cols.is_empty()).then(|| cols.join(","))
            },
            ..url.get_untracked()
        });
    };
    Some(view! {
        <details class="multi">
            <summary>{move || format!("Columns: {}", url.get().columns().len())}</summary>
            <div role="group" aria-label="Columns">
                {names.into_iter().map(|key| {
                    let k = key.clone();
                    view! {
                        <label>
                            <input type="checkbox"
                                prop:checked=move || url.get().columns().contains(&k)
                                on:change={
                                    let key = key.clone();
                                    move |ev| pin(key.clone(), event_target_checked(&ev))
                                }/>
                            {key.clone()}
                        </label>
                    }
                }).collect_view()}
            </div>
        </details>
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_beneath_is_the_filter_with_the_root_ok() {
        let mut u = WorkspaceUrl {
            status: Some("error".into()),
            ..Default::default()
        };
        set_failed_beneath(&mut u, true);
        assert_eq!(u.status.as_deref(), Some("ok"));
        assert_eq!(u.filters, ["error_count > 0"]);
        assert!(failed_beneath(&u));
        // Another status turns the switch off; the filter stays, as a chip.
        u.status = Some("ok,error".into());
        assert!(!failed_beneath(&u));
        u.status = Some("ok".into());
        set_failed_beneath(&mut u, false);
        assert_eq!((u.status, u.filters.len()), (None, 0));
    }

    #[test]
    fn the_builder_makes_canonical_expressions_and_names_mistakes() {
        assert_eq!(
            expression("error_count", ">", "0").as_deref(),
            Ok("error_count > 0")
        );
        assert_eq!(
            expression("attr.task", "=", "math word").as_deref(),
            Ok("attr.task = \"math word\"")
        );
        assert_eq!(
            expression("attr.reward", "exists", "ignored").as_deref(),
            Ok("attr.reward exists")
        );
        assert_eq!(
            expression("attr.ok", "=", "true").as_deref(),
            Ok("attr.ok = true")
        );
        let e = expression("attr.reward", "<", "").expect_err("a value is needed");
        assert!(e.contains("missing"), "{e}");
        let e = expression("attr.ok", "<", "true").expect_err("booleans only = and !=");
        assert!(e.contains("= or !="), "{e}");
        assert_eq!(
            relisted(
                WorkspaceUrl {
                    trace_id: Some("t".into()),
                    ..Default::default()
                },
                |_| {}
            )
            .trace_id,
            None
        );
    }
}
