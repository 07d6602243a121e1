use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    path, Lazy,
};
use treeline_wire::SessionInfo;

pub mod api;
mod client_data;
mod compare_url;
mod components;
mod distinct;
pub mod format;
mod pages;
mod routes;
mod run_compare_url;
mod runs_url;
mod url;

#[cfg(feature = "ssr")]
pub use api::{Backend, SharedBackend};

/// The HTML document around the app, rendered by the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" type="image/svg+xml" href="/favicon.svg"/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// Who is signed in, and the way out; nothing when the server needs no sign-in or
/// the caller came with a key rather than a session.
#[component]
fn Account(me: Resource<Result<SessionInfo, api::ApiError>>) -> impl IntoView {
    view! {
        <Suspense fallback=|| ()>
            {move || {
                me.get().and_then(Result::ok).filter(|s| s.signed_in).map(|s| {
                    let reach = s.project.as_ref().map_or_else(
                        || "every project".to_string(),
                        |p| format!("project {p} only"),
                    );
                    let title = format!("{} key, {reach}", s.scope.unwrap_or_default());
                    view! {
                        <form class="account" method="post" action="/logout">
                            <span class="who" title=title>{s.name.unwrap_or_default()}</span>
                            <button type="submit">"Sign out"</button>
                        </form>
                    }
                })
            }}
        </Suspense>
    }
}

/// Lag a person would notice: a trace just written may be missing from the lists.
const NOTICEABLE_LAG_MS: i64 = 1_000;

/// A strip under the top bar while the replica the dashboard reads lags its primary.
#[component]
fn ReplicaLag(me: Resource<Result<SessionInfo, api::ApiError>>) -> impl IntoView {
    view! {
        <Suspense fallback=|| ()>
            {move || {
                let lag = me.get().and_then(Result::ok).and_then(|s| s.replica_lag_ms)?;
                (lag >= NOTICEABLE_LAG_MS).then(|| {
                    let behind = format::duration(lag.saturating_mul(1_000));
                    view! {
                        <div class="replica-lag" role="status">
                            {format!(
                                "This dashboard reads a replica that is {behind} behind the \
                                 database: the newest traces and runs may not show yet."
                            )}
                        </div>
                    }
                })
            }}
        </Suspense>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    let me = Resource::new(|| (), |_| api::session());
    view! {
        <Stylesheet id="treeline" href="/pkg/treeline.css"/>
        <Title text="Treeline"/>
        <Router>
            <header class="topbar">
                <a class="brand" href="/">"Treeline"</a>
                <nav>
                    <a href="/">"Runs"</a>
                    <a href="/traces">"Traces"</a>
                </nav>
                <Account me/>
            </header>
            <ReplicaLag me/>
            <main>
                <Routes fallback=|| view! { <h1>"Page not found"</h1><p class="empty">"Nothing lives at this address."</p> }>
                    <Route path=path!("") view=pages::runs::RunsPage/>
                    <Route path=path!("/runs/:run_id") view={Lazy::<routes::RunDetail>::new()}/>
                    <Route path=path!("/traces") view={Lazy::<routes::Traces>::new()}/>
                    <Route path=path!("/compare") view={Lazy::<routes::Compare>::new()}/>
                    <Route path=path!("/compare-runs") view={Lazy::<routes::CompareRuns>::new()}/>
                </Routes>
            </main>
        </Router>
    }
}
