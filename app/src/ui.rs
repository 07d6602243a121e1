use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    path, Lazy,
};

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
fn Account() -> impl IntoView {
    let me = Resource::new(|| (), |_| api::session());
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

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
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
                <Account/>
            </header>
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
