//! Treeline's dashboard (Leptos, server-rendered then hydrated). The wire types live
//! in `treeline-wire`.
//!
//! The `ssr` and `hydrate` features live only here: the server picks `ssr`, the
//! wasm frontend picks `hydrate`.

#[cfg(any(feature = "ssr", feature = "hydrate"))]
#[allow(
    unreachable_pub,
    reason = "Leptos's #[component] makes each component's props builder `pub`; what the \
              crate exports is what this file re-exports"
)]
mod ui;
#[cfg(any(feature = "ssr", feature = "hydrate"))]
pub use ui::*;
