//! Treeline's dashboard (Leptos, server-rendered then hydrated) and the wire types
//! that the server, the browser and the Rust client share.
//!
//! The `ssr` and `hydrate` features live only here: the server picks `ssr`, the
//! wasm frontend picks `hydrate`, and plain users of the wire types pick neither.

pub mod wire;

#[cfg(any(feature = "ssr", feature = "hydrate"))]
mod ui;
#[cfg(any(feature = "ssr", feature = "hydrate"))]
pub use ui::*;
