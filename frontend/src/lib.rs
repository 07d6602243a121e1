/// Called by the page's hydration script: takes over the server-rendered DOM.
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(treeline_app::App);
}
