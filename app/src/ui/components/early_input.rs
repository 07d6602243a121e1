//! What a reader typed or chose before the page hydrated. Hydration binds each
//! server-rendered control to its signal and writes the signal's value into it, so
//! without this, text typed while the page's code was still loading vanished.

use leptos::prelude::*;

/// Reads the control `selector` names as the component is made during hydration
/// (before the binding overwrites it) and, when it holds something other than
/// `signal`, hands that to `signal` once the page is live. Does nothing on the
/// server or when the component is made after hydration.
pub fn keep(selector: &'static str, signal: RwSignal<String>) {
    #[cfg(all(feature = "hydrate", not(feature = "ssr")))]
    {
        use leptos::wasm_bindgen::JsCast;
        use leptos::web_sys::{HtmlInputElement, HtmlSelectElement};
        let hydrating = Owner::current_shared_context().is_some_and(|sc| sc.during_hydration());
        let Some(el) = hydrating
            .then(|| document().query_selector(selector).ok().flatten())
            .flatten()
        else {
            return;
        };
        let early = if let Some(input) = el.dyn_ref::<HtmlInputElement>() {
            input.value()
        } else if let Some(select) = el.dyn_ref::<HtmlSelectElement>() {
            select.value()
        } else {
            return;
        };
        if early != signal.get_untracked() {
            Effect::new(move |_| signal.set(early.clone()));
        }
    }
    #[cfg(not(all(feature = "hydrate", not(feature = "ssr"))))]
    let _ = (selector, signal);
}
