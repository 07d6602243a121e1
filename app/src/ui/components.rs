pub mod body;
pub mod chart;
pub mod compare;
pub mod early_input;
pub mod filter_builder;
pub mod filters;
pub mod inspector;
pub mod span_tree;
pub mod status;
pub mod timeline;
pub mod trace_list;
pub mod window_picker;

/// Puts `text` on the clipboard (in the browser; nothing on the server).
pub fn copy_text(text: &str) {
    #[cfg(all(feature = "hydrate", not(feature = "ssr")))]
    if let Some(window) = leptos::web_sys::window() {
        let _ = window.navigator().clipboard().write_text(text);
    }
    #[cfg(not(all(feature = "hydrate", not(feature = "ssr"))))]
    let _ = text;
}
