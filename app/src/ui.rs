use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    StaticSegment,
};

pub mod api;
mod pages;

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
                </nav>
            </header>
            <main>
                <Routes fallback=|| view! { <p class="empty">"Page not found."</p> }>
                    <Route path=StaticSegment("") view=pages::runs::RunsPage/>
                </Routes>
            </main>
        </Router>
    }
}
