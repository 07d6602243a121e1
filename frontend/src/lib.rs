/// Called by the page's hydration script: takes over the server-rendered DOM.
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    use leptos::prelude::document;
    console_error_panic_hook::set_once();
    // Hydration starts Leptos's executor on the same one.
    wasm_bindgen_futures::spawn_local(async {
        let Some(body) = document().body() else {
            return;
        };
        // Waits for a lazy route's chunk (a deep link to a page past the first) before
        // taking over the page.
        leptos::mount::hydrate_from_async(body, treeline_app::App)
            .await
            .forget();
        // The page now answers input (`<html data-hydrated>`): before, a click or a
        // key does nothing, so the browser tests wait for this mark.
        if let Some(root) = document().document_element() {
            _ = root.set_attribute("data-hydrated", "");
        }
    });
}
