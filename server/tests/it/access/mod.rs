//! A team server: keys and their scopes, project keys, browser sign-in, revocation,
//! and cross-site requests, through the whole application router (pages, API,
//! OTLP) on both databases.

mod annotations;
mod cross_site;
mod keys;
mod retention;
mod run_delete;
mod signin;
