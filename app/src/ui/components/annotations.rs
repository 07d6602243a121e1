//! The annotations of the span in the inspector (a root's are its trace's), and the
//! form that adds or changes the caller's own: `a` opens it, Enter saves, Escape
//! cancels. Loaded in the browser only: they change while the page is open.

use leptos::ev;
use leptos::html;
use leptos::prelude::*;

use crate::ui::client_data::ClientData;
use serde_json::{json, Value};
use treeline_wire::annotations::Annotation;

use crate::ui::api;
use crate::ui::format;

/// Which annotations a target shows and where new ones go: a root span stands for
/// its trace (what the trace list and its filters are about); another span for itself.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub run_id: String,
    pub trace_id: String,
    /// None for the trace.
    pub span_id: Option<String>,
}

impl Target {
    fn what(&self) -> &'static str {
        if self.span_id.is_some() {
            "span"
        } else {
            "trace"
        }
    }

    fn holds(&self, a: &Annotation) -> bool {
        a.span_id == self.span_id
    }
}

/// Counts the annotations the inspector's form wrote or removed on this page, so
/// what lists a run's annotation names (review mode's labels) can read them again.
#[derive(Clone, Copy)]
pub struct NotesWritten(pub RwSignal<u32>);

impl NotesWritten {
    fn bump(written: Option<NotesWritten>) {
        if let Some(NotesWritten(n)) = written {
            n.update(|n| *n = n.wrapping_add(1));
        }
    }
}

#[component]
pub fn Annotations(target: Target) -> impl IntoView {
    let version = RwSignal::new(0u32);
    let written = use_context::<NotesWritten>();
    let list = {
        let (run, trace) = (target.run_id.clone(), target.trace_id.clone());
        ClientData::new(move || {
            version.track();
            api::annotations(run.clone(), trace.clone())
        })
    };
    let me = ClientData::new(api::session);
    // Writes need a write key, or a server without keys.
    let can_write = move || {
        me.get()
            .and_then(Result::ok)
            .is_some_and(|s| !s.auth || matches!(s.scope.as_deref(), Some("write" | "admin")))
    };
    let my_key = move || {
        me.get()
            .and_then(Result::ok)
            .and_then(|s| s.key_id)
            .unwrap_or_default()
    };

    let open = RwSignal::new(false);
    let name = RwSignal::new(String::new());
    let value = RwSignal::new(String::new());
    let comment = RwSignal::new(String::new());
    let problem: RwSignal<Option<String>> = RwSignal::new(None);
    let name_input: NodeRef<html::Input> = NodeRef::new();
    // Open with the fields given (empty for a new note), or closed with them emptied.
    let fill = move |n: String, v: String, c: String, show: bool| {
        name.set(n);
        value.set(v);
        comment.set(c);
        problem.set(None);
        open.set(show);
    };
    let start = move || fill(String::new(), String::new(), String::new(), true);
    let close = move || fill(String::new(), String::new(), String::new(), false);
    Effect::new(move |_| {
        if open.get() {
            if let Some(input) = name_input.get() {
                let _ = input.focus();
            }
        }
    });
    let handle = window_event_listener(ev::keydown, move |e| {
        let command = e.key() == "a" && !(e.ctrl_key() || e.meta_key() || e.alt_key());
        if !command || typing(&e) || open.get_untracked() || !can_write() {
            return;
        }
        e.prevent_default();
        start();
    });
    on_cleanup(move || handle.remove());

    let here = target.clone();
    let known = move || -> Vec<Annotation> {
        list.get()
            .and_then(Result::ok)
            .map(|l| {
                l.annotations
                    .into_iter()
                    .filter(|a| here.holds(a))
                    .collect()
            })
            .unwrap_or_default()
    };
    let names = {
        let known = known.clone();
        move || {
            let mut n: Vec<String> = known().into_iter().map(|a| a.name).collect();
            n.dedup();
            n
        }
    };
    let save = {
        let target = target.clone();
        let known = known.clone();
        move |ev: ev::SubmitEvent| {
            ev.prevent_default();
            let n = name.get_untracked().trim().to_string();
            let kind = known().into_iter().find(|a| a.name == n).map(|a| a.kind);
            let body = json!({
                "span_id": target.span_id,
                "name": n,
                "value": typed(&value.get_untracked(), kind.as_deref()),
                "comment": comment.get_untracked(),
                // The dashboard is a person at a keyboard, whatever the credentials.
                "source": "person",
            });
            let t = target.clone();
            leptos::task::spawn_local(async move {
                match api::annotate(t.run_id, t.trace_id, body).await {
                    Ok(_) => {
                        close();
                        version.update(|v| *v += 1);
                        NotesWritten::bump(written);
                    }
                    Err(e) => problem.set(Some(e.message)),
                }
            });
        }
    };
    let remove = {
        let target = target.clone();
        move |n: String| {
            let t = target.clone();
            leptos::task::spawn_local(async move {
                let body = json!({"span_id": t.span_id, "name": n});
                match api::unannotate(t.run_id, t.trace_id, body).await {
                    Ok(_) => {
                        version.update(|v| *v += 1);
                        NotesWritten::bump(written);
                    }
                    Err(e) => problem.set(Some(e.message)),
                }
            });
        }
    };
    let edit = move |a: &Annotation| {
        let v = format::note_value(&a.value);
        fill(
            a.name.clone(),
            v,
            a.comment.clone().unwrap_or_default(),
            true,
        );
    };
    let what = target.what();

    view! {
        <section class="annotations" aria-label=format!("Annotations of this {what}")>
            <h3>"Annotations"</h3>
            {move || match list.get() {
                None => view! { <p class="loading">"Loading annotations…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" role="alert">{e.message}</p> }.into_any(),
                Some(Ok(_)) => {
                    let rows = known();
                    if rows.is_empty() {
                        return view! { <p class="muted">{format!("None on this {what} yet.")}</p> }.into_any();
                    }
                    let mine = my_key();
                    let writer = can_write();
                    view! {
                        <ul class="note-list">
                            {rows.into_iter().map(|a| {
                                let own = writer && a.author.key_id == mine;
                                let (n, this) = (a.name.clone(), a.clone());
                                let text = format::note_value(&a.value);
                                view! {
                                    <li class="note">
                                        <span class="chip note-chip">{a.name.clone()}" = "<strong>{text}</strong></span>
                                        <span class="muted note-by">
                                            {format!("{} · {} · {}", a.author.name, a.source.name(), format::timestamp(a.updated_us))}
                                        </span>
                                        {a.comment.clone().map(|c| view! { <p class="note-comment">{c}</p> })}
                                        {own.then(|| view! {
                                            <span class="note-actions">
                                                <button type="button" class="link-button" on:click=move |_| edit(&this)>"Change"</button>
                                                <button type="button" class="link-button" on:click={
                                                    let remove = remove.clone();
                                                    let n = n.clone();
                                                    move |_| remove(n.clone())
                                                }>"Remove"</button>
                                            </span>
                                        })}
                                    </li>
                                }
                            }).collect_view()}
                        </ul>
                    }.into_any()
                }
            }}
            {move || (can_write() && !open.get()).then(|| view! {
                <button type="button" class="link-button" aria-keyshortcuts="a"
                    on:click=move |_| start()>
                    {format!("Annotate this {what}")}<kbd aria-hidden="true">"a"</kbd>
                </button>
            })}
            <Show when=move || open.get()>
                <form class="note-form" on:submit=save.clone()
                    on:keydown=move |e: ev::KeyboardEvent| if e.key() == "Escape" { e.prevent_default(); close(); }>
                    <label>"Name"
                        <input node_ref=name_input required list="note-names" placeholder="label, score…"
                            prop:value=move || name.get() on:input=move |e| name.set(event_target_value(&e))/>
                    </label>
                    <datalist id="note-names">
                        {let names = names.clone(); move || names().into_iter().map(|n| view! { <option value=n/> }).collect_view()}
                    </datalist>
                    <label>"Value"
                        <input required placeholder="a number, true/false, or text"
                            prop:value=move || value.get() on:input=move |e| value.set(event_target_value(&e))/>
                    </label>
                    <label>"Comment"
                        <input placeholder="optional"
                            prop:value=move || comment.get() on:input=move |e| comment.set(event_target_value(&e))/>
                    </label>
                    <span class="note-form-actions">
                        <button type="submit">"Save"</button>
                        <button type="button" on:click=move |_| close()>"Cancel"</button>
                        <span class="muted">"Enter saves, Escape cancels"</span>
                    </span>
                </form>
            </Show>
            {move || problem.get().map(|p| view! { <p class="error" role="alert">{p}</p> })}
        </section>
    }
}

/// Whether a key press is typing into a field, where `a` is a letter, not a command.
pub(crate) fn typing(e: &ev::KeyboardEvent) -> bool {
    use leptos::wasm_bindgen::JsCast;
    e.target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        .is_some_and(|el| {
            matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT")
                || el.has_attribute("contenteditable")
        })
}

/// The value a person typed, as the type the name already has in this place, or else
/// read as a boolean, a number, or text.
fn typed(text: &str, kind: Option<&str>) -> Value {
    let t = text.trim();
    let number = t.parse::<f64>().ok().filter(|n| n.is_finite());
    match (kind, t) {
        (Some("string"), _) => Value::String(text.to_string()),
        (None | Some("boolean"), "true") => Value::Bool(true),
        (None | Some("boolean"), "false") => Value::Bool(false),
        _ => match number.and_then(serde_json::Number::from_f64) {
            Some(n) if kind != Some("boolean") => Value::Number(n),
            _ => Value::String(text.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_values_follow_the_names_type() {
        assert_eq!(typed("3", None), json!(3.0));
        assert_eq!(typed("true", None), json!(true));
        assert_eq!(typed("reward hacking", None), json!("reward hacking"));
        assert_eq!(typed("3", Some("string")), json!("3"));
        assert_eq!(typed("true", Some("string")), json!("true"));
        assert_eq!(typed(" 0.5 ", Some("number")), json!(0.5));
        assert_eq!(format::note_value(&typed("3", None)), "3");
        assert_eq!(format::note_value(&json!(2.5)), "2.5");
    }
}
