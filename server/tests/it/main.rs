//! The integration tests, linked into one binary: each linked test binary of this
//! crate carries the whole server, so one binary keeps build time and disk down.

mod access;
mod api;
mod common;
#[cfg(feature = "devtools")]
mod compare;
mod conformance;
mod crash;
#[cfg(feature = "devtools")]
mod demo;
mod guard;
#[cfg(feature = "devtools")]
mod load;
mod otlp;
mod replica;
mod run_compare;
mod schema;
mod size;
mod team;
mod tenancy;
#[cfg(feature = "devtools")]
mod transfer;
