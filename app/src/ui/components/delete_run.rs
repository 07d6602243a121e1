//! Run Detail's "Delete this run": folded away at the foot of the page, and armed
//! only once the run's name is typed, since nothing brings a run back.

use leptos::prelude::*;
use leptos_router::hooks::use_navigate;

use crate::ui::api::{self, encode};

#[component]
pub fn DeleteRun(run_id: String, name: String, project: String) -> impl IntoView {
    let typed = RwSignal::new(String::new());
    let failed = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let armed = {
        let name = name.clone();
        move || typed.get().trim() == name && !busy.get()
    };
    let navigate = use_navigate();
    let delete = move |_| {
        let (run_id, project, navigate) = (run_id.clone(), project.clone(), navigate.clone());
        busy.set(true);
        failed.set(None);
        leptos::task::spawn_local(async move {
            match api::delete_run(run_id).await {
                Ok(()) => navigate(
                    &format!("/?project={}", encode(&project)),
                    Default::default(),
                ),
                Err(e) => {
                    failed.set(Some(e.message));
                    busy.set(false);
                }
            }
        });
    };
    view! {
        <details class="delete-run">
            <summary>"Delete this run"</summary>
            <p>
                "Deleting removes the run and all of its traces, spans, inputs and outputs, metrics "
                "and annotations, for everyone. It cannot be undone. It takes an admin key."
            </p>
            <label>
                <span>"Type the run's name, " <strong>{name.clone()}</strong> ", to confirm"</span>
                <input type="text" autocomplete="off" spellcheck="false"
                    prop:value=move || typed.get()
                    on:input=move |ev| typed.set(event_target_value(&ev))/>
            </label>
            <button type="button" class="danger" disabled=move || !armed() on:click=delete>
                {move || if busy.get() { "Deleting…" } else { "Delete run" }}
            </button>
            {move || failed.get().map(|m| view! {
                <p class="error" role="alert">"The run was not deleted: " {m}</p>
            })}
        </details>
    }
}
