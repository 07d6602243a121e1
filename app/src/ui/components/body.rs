//! User-supplied bodies, rendered by shape: chat messages as a transcript, JSON as a
//! collapsible tree, strings as text. Everything is text: nothing becomes HTML.

use leptos::prelude::*;
use serde_json::Value;
use treeline_wire::text::TextQuery;

/// The body search the inspector marks (the workspace's `text`), as context.
#[derive(Clone, Copy)]
pub struct Highlight(pub Memo<Option<TextQuery>>);

fn search() -> Option<TextQuery> {
    use_context::<Highlight>().and_then(|h| h.0.get())
}

/// `text` with the words of `search` marked, by the rule the server matched them.
fn marked(text: String, search: &Option<TextQuery>) -> AnyView {
    let marks = search.as_ref().map(|q| q.marks(&text)).unwrap_or_default();
    if marks.is_empty() {
        return text.into_any();
    }
    let mut pieces = Vec::with_capacity(marks.len() * 2 + 1);
    let mut at = 0;
    for mark in marks {
        pieces.push(text[at..mark.start].to_string().into_any());
        pieces.push(view! { <mark>{text[mark.clone()].to_string()}</mark> }.into_any());
        at = mark.end;
    }
    pieces.push(text[at..].to_string().into_any());
    pieces.collect_view().into_any()
}

/// Whether a string in `value` holds a match, so its branch opens.
fn holds_match(value: &Value, search: &TextQuery) -> bool {
    match value {
        Value::String(s) => !search.marks(s).is_empty(),
        Value::Array(items) => items.iter().any(|v| holds_match(v, search)),
        Value::Object(map) => map.values().any(|v| holds_match(v, search)),
        _ => false,
    }
}

/// Chat messages in `value`, when it holds any: a list of `{role, content}`, an
/// object with such a `messages` list, or one message.
fn messages(value: &Value) -> Option<Vec<(String, String)>> {
    let list = match value {
        Value::Array(items) => items.clone(),
        Value::Object(obj) if obj.get("messages").is_some_and(Value::is_array) => {
            obj.get("messages")?.as_array()?.clone()
        }
        Value::Object(obj) if obj.contains_key("role") => vec![value.clone()],
        _ => return None,
    };
    if list.is_empty() {
        return None;
    }
    list.iter()
        .map(|m| {
            let role = m.get("role")?.as_str()?.to_string();
            let content = match m.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => serde_json::to_string_pretty(other).unwrap_or_default(),
            };
            let calls = m
                .get("tool_calls")
                .map(|c| {
                    format!(
                        "\ntool calls: {}",
                        serde_json::to_string_pretty(c).unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            Some((role, format!("{content}{calls}")))
        })
        .collect()
}

#[component]
pub fn BodyView(
    #[prop(into)] label: String,
    value: Option<Value>,
    #[prop(optional)] truncated: bool,
    #[prop(optional)] chat: bool,
) -> impl IntoView {
    let note = truncated
        .then(|| view! { <span class="note" title="cut by the client's preview, or at the server's 16 MiB">"truncated: the start of a longer body"</span> });
    let content = move || {
        match value.clone() {
        None => view! { <p class="muted">"not captured"</p> }.into_any(),
        Some(Value::String(text)) => {
            view! { <pre class="text-body">{marked(text, &search())}</pre> }.into_any()
        }
        Some(v) => match messages(&v).filter(|_| chat || v.get("messages").is_some()) {
            Some(list) => view! {
                <ol class="transcript">
                    {list.into_iter().map(|(role, text)| {
                        let class = format!("message role-{}", role.replace(|c: char| !c.is_ascii_alphanumeric(), ""));
                        view! {
                        <li class=class>
                            <span class="role">{role}</span>
                            <pre>{marked(text, &search())}</pre>
                        </li>
                    }}).collect_view()}
                </ol>
            }.into_any(),
            None => view! { <div class="json-body"><JsonTree value=v open=true/></div> }.into_any(),
        },
    }
    };
    view! {
        <section class="body">
            <h3>{label} {note}</h3>
            {content}
        </section>
    }
}

/// A JSON value as nested, collapsible lists.
#[component]
pub fn JsonTree(value: Value, #[prop(optional)] open: bool) -> impl IntoView {
    let search = search();
    let open = open || search.as_ref().is_some_and(|q| holds_match(&value, q));
    match value {
        Value::Object(map) if !map.is_empty() => {
            let summary = format!("{{…}} {} keys", map.len());
            view! {
                <details class="json" open=open>
                    <summary>{summary}</summary>
                    <ul>
                        {map.into_iter().map(|(k, v)| view! {
                            <li><span class="json-key">{k}": "</span><JsonTree value=v/></li>
                        }).collect_view()}
                    </ul>
                </details>
            }
            .into_any()
        }
        Value::Array(items) if !items.is_empty() => {
            let summary = format!("[…] {} items", items.len());
            view! {
                <details class="json" open=open>
                    <summary>{summary}</summary>
                    <ol start="0">
                        {items.into_iter().map(|v| view! { <li><JsonTree value=v/></li> }).collect_view()}
                    </ol>
                </details>
            }
            .into_any()
        }
        // A stack trace, a traceback, any text of several lines: as its lines, not as
        // one quoted string full of \n.
        Value::String(s) if s.contains('\n') => {
            view! { <pre class="json-text">{marked(s, &search)}</pre> }.into_any()
        }
        // Quoted as written, unless a match is marked in it.
        Value::String(s) if search.as_ref().is_some_and(|q| !q.marks(&s).is_empty()) => {
            view! { <span class="json-string">"\""{marked(s, &search)}"\""</span> }.into_any()
        }
        Value::String(s) => {
            view! { <span class="json-string">{format!("{s:?}")}</span> }.into_any()
        }
        other => view! { <span class="json-scalar">{other.to_string()}</span> }.into_any(),
    }
}
