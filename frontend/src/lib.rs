/// Called by the page's hydration script: takes over the server-rendered DOM.
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    // Waits for a lazy route's chunk (a deep link to a page past the first) before
    // taking over the page.
    leptos::mount::hydrate_lazy(treeline_app::App);
}
