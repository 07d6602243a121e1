//! Review mode's keys on the trace list: `j` and `k` select the next or previous
//! trace; with `review=NAME` in the URL, a digit writes NAME = digit on the selected
//! trace, as a person, and moves on, and a letter writes one of the labels the
//! banner lists (the run's most used values of a string annotation). The selection
//! is the URL's, so a review is a link.

use leptos::ev;
use leptos::prelude::*;
use serde_json::json;
use treeline_wire::annotations::{NoteChip, MAX_CHIPS};
use treeline_wire::filter::AttributeKey;
use treeline_wire::TraceSummary;

use crate::ui::api;
use crate::ui::components::annotations::{typing, NotesWritten};
use crate::ui::url::WorkspaceUrl;

/// Listens for the keys while the list is on screen; answers where a refused write
/// is said.
pub(super) fn keys(
    traces: RwSignal<Vec<TraceSummary>>,
    url: Memo<WorkspaceUrl>,
    go_to: Callback<WorkspaceUrl>,
    labels: RwSignal<Labels>,
) -> RwSignal<Option<String>> {
    let problem = RwSignal::new(None::<String>);
    // The selected row kept in view as the keys move it.
    Effect::watch(
        move || url.with(|u| u.trace_id.clone()),
        |_, _, _| {
            if let Ok(Some(row)) = document().query_selector(".trace-list a[aria-current=\"true\"]")
            {
                let options = web_sys::ScrollIntoViewOptions::new();
                options.set_block(web_sys::ScrollLogicalPosition::Nearest);
                row.scroll_into_view_with_scroll_into_view_options(&options);
            }
        },
        false,
    );
    let handle = window_event_listener(ev::keydown, move |e| {
        if e.ctrl_key() || e.meta_key() || e.alt_key() || typing(&e) {
            return;
        }
        let u = url.get_untracked();
        let key = e.key();
        // What the key writes on the selected trace, in review mode.
        let write = u.review.clone().and_then(|score| {
            if let Some(d) = key.parse::<u8>().ok().filter(|d| *d <= 9) {
                return Some((score, json!(d)));
            }
            labels.with_untracked(|l| {
                let value = l.keys.iter().find(|(c, _)| key == c.to_string())?;
                Some((l.name.clone()?, json!(value.1)))
            })
        });
        let step: isize = match key.as_str() {
            "j" => 1,
            "k" => -1,
            _ if write.is_some() => 0,
            _ => return,
        };
        e.prevent_default();
        let list = traces.get_untracked();
        let here = list.iter().position(|t| {
            Some(&t.trace_id) == u.trace_id.as_ref()
                && u.run_id.as_ref().is_none_or(|r| *r == t.run_id)
        });
        let next = match (here, step) {
            (None, _) => Some(0),
            (Some(i), 0 | 1) => Some(i + 1),
            (Some(i), _) => i.checked_sub(1),
        }
        .filter(|i| *i < list.len());
        let chosen = here.map(|i| list[i].clone());
        let select = move |i: Option<usize>, u: &WorkspaceUrl| {
            if let Some(t) = i.and_then(|i| list.get(i)) {
                go_to.run(u.with_selection(&t.run_id, &t.trace_id, t.root_span_id.as_deref()));
            }
        };
        let (Some((name, value)), Some(t)) = (write, chosen) else {
            if step != 0 {
                select(next, &u);
            }
            return;
        };
        leptos::task::spawn_local(async move {
            let body = json!({"name": name, "value": value, "source": "person"});
            let written = api::annotate(t.run_id.clone(), t.trace_id.clone(), body).await;
            match written {
                Ok(_) => {
                    problem.set(None);
                    refresh_chips(traces, &t).await;
                    select(next, &u);
                }
                Err(e) => problem.set(Some(e.message)),
            }
        });
    });
    on_cleanup(move || handle.remove());
    problem
}

/// What review mode's keys do, with the labels letters write and a choice of the
/// string annotation they come from.
#[component]
pub(super) fn Banner(
    url: Memo<WorkspaceUrl>,
    go_to: Callback<WorkspaceUrl>,
    labels: RwSignal<Labels>,
) -> impl IntoView {
    let run_id = Memo::new(move |_| url.with(|u| u.run_id.clone()));
    let score = Memo::new(move |_| url.with(|u| u.review.clone()));
    // Read again after the inspector's form writes one: a first label gets its letter.
    let written = use_context::<NotesWritten>().map(|NotesWritten(n)| n);
    let notes = Resource::new(
        move || (run_id.get(), written.map(|n| n.get())),
        |(run, _)| async move {
            match run {
                Some(run) => api::attribute_keys(run)
                    .await
                    .map(|k| k.notes)
                    .unwrap_or_default(),
                None => Vec::new(),
            }
        },
    );
    let chosen = Memo::new(move |_| url.with(|u| u.label.clone()));
    Effect::new(move |_| {
        if let Some(notes) = notes.get() {
            labels.set(labels_of(&notes, chosen.get().as_deref()).1);
        }
    });
    let pick = move |ev: ev::Event| {
        let name = event_target_value(&ev);
        go_to.run(WorkspaceUrl {
            label: Some(name),
            ..url.get_untracked()
        });
    };
    view! {
        <div class="review-banner" role="note">
            <p>
                {move || format!(
                    "Reviewing: j and k move through the list, a digit sets note.{} on the trace and moves on, a annotates.",
                    score.get().unwrap_or_default(),
                )}
                <button type="button" class="link-button" on:click=move |_| {
                    go_to.run(WorkspaceUrl { review: None, label: None, ..url.get_untracked() })
                }>"Stop"</button>
            </p>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let notes = notes.await;
                    let (names, Labels { name, keys }) = labels_of(&notes, chosen.get().as_deref());
                    let scoped = run_id.get_untracked().is_some();
                    let line = match name {
                        _ if !scoped => None,
                        None => Some(view! {
                            <p class="muted">"Letters write labels once this run has a string annotation: a opens the form to write the first."</p>
                        }.into_any()),
                        Some(name) => Some(view! {
                            <p class="review-labels">
                                <label>"A letter sets note."
                                    <select aria-label="Label annotation" on:change=pick>
                                        {names.into_iter().map(|n| {
                                            let selected = n == name;
                                            view! { <option value=n.clone() selected=selected>{n.clone()}</option> }
                                        }).collect_view()}
                                    </select>
                                    ":"
                                </label>
                                {if keys.is_empty() {
                                    view! { <span class="muted">" no values in this run yet: a opens the form to write the first."</span> }.into_any()
                                } else {
                                    keys.into_iter().map(|(c, value)| view! {
                                        <span class="review-label"><kbd>{c.to_string()}</kbd>" "{value}</span>
                                    }).collect_view().into_any()
                                }}
                            </p>
                        }.into_any()),
                    };
                    line
                })}
            </Transition>
        </div>
    }
}

/// Rereads a trace's annotations and redraws its chips as the server would.
async fn refresh_chips(traces: RwSignal<Vec<TraceSummary>>, t: &TraceSummary) {
    let Ok(list) = api::annotations(t.run_id.clone(), t.trace_id.clone()).await else {
        return;
    };
    let mut chips: Vec<NoteChip> = Vec::new();
    for a in list.annotations {
        match chips
            .iter_mut()
            .find(|c| c.name == a.name && c.value == a.value)
        {
            Some(c) => c.count += 1,
            None => chips.push(NoteChip {
                name: a.name,
                value: a.value,
                count: 1,
            }),
        }
    }
    chips.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
    chips.truncate(MAX_CHIPS);
    traces.update(|ts| {
        if let Some(row) = ts
            .iter_mut()
            .find(|r| r.trace_id == t.trace_id && r.run_id == t.run_id)
        {
            row.notes = chips;
        }
    });
}

/// The labels letter keys write in review mode: a string annotation's name and its
/// values, each with its key.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Labels {
    pub name: Option<String>,
    pub keys: Vec<(char, String)>,
}

/// Letter keys for the labels offered at once: more would not fit the banner.
const MAX_LABELS: usize = 9;
/// Letters the list and the inspector already use: `j`/`k` move, `a` annotates.
const TAKEN: [char; 3] = ['j', 'k', 'a'];

/// A letter for each value, the first free one of its own letters if it has one
/// (so "fine" is `f`), else the first free letter of the alphabet.
pub(super) fn letter_keys(values: &[String]) -> Vec<(char, String)> {
    let mut keys: Vec<(char, String)> = Vec::new();
    let free = |c: char, keys: &[(char, String)]| {
        c.is_ascii_lowercase() && !TAKEN.contains(&c) && keys.iter().all(|(k, _)| *k != c)
    };
    for value in values.iter().take(MAX_LABELS) {
        let own = value.chars().map(|c| c.to_ascii_lowercase());
        let Some(c) = own.chain('a'..='z').find(|c| free(*c, &keys)) else {
            break;
        };
        keys.push((c, value.clone()));
    }
    keys
}

/// The string annotations of the run that labels may come from, and the chosen one's
/// letter keys: the URL's `label` when the run has it, else the run's most used
/// string annotation.
pub(super) fn labels_of(notes: &[AttributeKey], chosen: Option<&str>) -> (Vec<String>, Labels) {
    let strings: Vec<&AttributeKey> = notes.iter().filter(|k| k.kind == "string").collect();
    let names = strings.iter().map(|k| k.key.clone()).collect();
    let name = chosen
        .filter(|c| strings.iter().any(|k| k.key == *c))
        .or_else(|| strings.first().map(|k| k.key.as_str()))
        .map(str::to_string);
    let values: Vec<String> = strings
        .iter()
        .find(|k| Some(&k.key) == name.as_ref())
        .map(|k| k.values.iter().map(|v| v.value.clone()).collect())
        .unwrap_or_default();
    let keys = letter_keys(&values);
    (names, Labels { name, keys })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn each_label_gets_a_free_letter_of_its_own_first() {
        let keys = letter_keys(&owned(&[
            "sandbox timeout",
            "wrong answer",
            "fine",
            "format",
        ]));
        assert_eq!(
            keys,
            vec![
                ('s', "sandbox timeout".into()),
                ('w', "wrong answer".into()),
                ('f', "fine".into()),
                ('o', "format".into()),
            ]
        );
    }

    #[test]
    fn labels_never_take_the_moving_or_annotating_keys() {
        // "jak" has only taken letters of its own: it gets the alphabet's first free.
        let keys = letter_keys(&owned(&["jak", "Ambiguous", "42"]));
        assert_eq!(
            keys,
            vec![
                ('b', "jak".into()),
                ('m', "Ambiguous".into()),
                ('c', "42".into())
            ]
        );
    }

    #[test]
    fn a_label_the_run_does_not_have_falls_back_to_its_first() {
        let note = |key: &str, kind: &str, values: &[&str]| AttributeKey {
            key: key.into(),
            kind: kind.into(),
            traces: 1,
            min: None,
            max: None,
            values: values
                .iter()
                .map(|v| treeline_wire::filter::ValueCount {
                    value: v.to_string(),
                    traces: 1,
                })
                .collect(),
        };
        let notes = [
            note("score", "number", &[]),
            note("label", "string", &["fine", "wrong answer"]),
            note("verdict", "string", &["ok"]),
        ];
        let (names, picked) = labels_of(&notes, Some("verdict"));
        assert_eq!(names, ["label", "verdict"]);
        assert_eq!(picked.name.as_deref(), Some("verdict"));
        assert_eq!(picked.keys, vec![('o', "ok".to_string())]);
        for missing in [Some("score"), Some("nobody"), None] {
            let (_, picked) = labels_of(&notes, missing);
            assert_eq!(picked.name.as_deref(), Some("label"), "{missing:?}");
            assert_eq!(picked.keys.len(), 2);
        }
        assert_eq!(labels_of(&[], Some("label")).1, Labels::default());
    }

    #[test]
    fn at_most_nine_labels_get_keys() {
        let many: Vec<String> = (0..20).map(|i| format!("v{i}")).collect();
        assert_eq!(letter_keys(&many).len(), MAX_LABELS);
    }
}
