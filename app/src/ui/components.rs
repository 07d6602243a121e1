pub mod annotations;
pub mod body;
pub mod changes;
pub mod chart;
pub mod compare;
pub mod config_diff;
pub mod delete_run;
pub mod early_input;
pub mod filter_builder;
pub mod filters;
pub mod group_lens;
pub mod heatmap;
pub mod inspector;
pub mod run_chart;
pub mod span_tree;
pub mod status;
pub mod timeline;
pub mod trace_list;
pub mod window_picker;

use leptos::prelude::*;

use crate::ui::client_data::ClientData;
use treeline_wire::filter::AttributeKeys;

use crate::ui::api::ApiError;

/// The run's root-attribute keys, as the panels' pickers read them.
pub type RunKeys = ClientData<Result<AttributeKeys, ApiError>>;

/// Sets a picker's `choice` to what `prefer` picks once the run's keys arrive,
/// unless a reader chose first.
pub fn choose_when_keys_arrive(
    keys: RunKeys,
    choice: RwSignal<Option<String>>,
    prefer: fn(&AttributeKeys) -> String,
) {
    Effect::new(move |_| {
        if let Some(Ok(k)) = keys.get() {
            if choice.get_untracked().is_none() {
                choice.set(Some(prefer(&k)));
            }
        }
    });
}

/// A button that copies what `text` gives when clicked, and says "Copied" for two
/// seconds after (announced to screen readers), so a click is seen to have worked.
#[component]
pub fn CopyButton(
    /// What to copy, read when the button is clicked.
    text: Callback<(), Option<String>>,
    /// The button's caption.
    caption: &'static str,
    /// Its accessible name, when the caption alone does not say what it copies.
    #[prop(optional)]
    label: Option<&'static str>,
) -> impl IntoView {
    let copied = RwSignal::new(false);
    let click = move |_| {
        if let Some(text) = text.run(()) {
            copy_text(&text);
            copied.set(true);
            set_timeout(move || copied.set(false), std::time::Duration::from_secs(2));
        }
    };
    view! {
        <button type="button" class="copy" class:copied=move || copied.get() aria-label=label on:click=click>
            {move || if copied.get() { "Copied ✓" } else { caption }}
        </button>
        <span class="visually-hidden" role="status">{move || if copied.get() { "Copied to the clipboard" } else { "" }}</span>
    }
}

/// Puts `text` on the clipboard (in the browser; nothing on the server).
pub fn copy_text(text: &str) {
    #[cfg(all(feature = "hydrate", not(feature = "ssr")))]
    if let Some(window) = leptos::web_sys::window() {
        let _ = window.navigator().clipboard().write_text(text);
    }
    #[cfg(not(all(feature = "hydrate", not(feature = "ssr"))))]
    let _ = text;
}
