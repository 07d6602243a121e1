//! The pages past the first, as routes whose views load on first visit. In the
//! release bundle (built with `--cfg treeline_split`) each view is its own wasm
//! chunk, so the runs list does not carry the workspace, Run Detail or Compare.
//! Elsewhere (`make dev`, which does not split) the same routes are plain code: a
//! lazy view in an unsplit bundle would import a module that does not exist. The
//! server always takes the lazy form, which names each chunk so a deep link's page
//! preloads it.

use leptos::prelude::*;

use super::pages;

/// A route for `$page`: lazy where the bundle is split (and on the server, which
/// names the chunks), plain code where it is not.
macro_rules! route {
    ($route:ident, $page:path) => {
        #[derive(Clone, Copy)]
        pub(crate) struct $route;

        #[cfg(any(feature = "ssr", treeline_split))]
        #[leptos_router::lazy_route]
        impl leptos_router::LazyRoute for $route {
            fn data() -> Self {
                $route
            }

            fn view(_this: Self) -> AnyView {
                $page().into_any()
            }
        }

        #[cfg(not(any(feature = "ssr", treeline_split)))]
        impl leptos_router::LazyRoute for $route {
            fn data() -> Self {
                $route
            }

            async fn view(_this: Self) -> AnyView {
                $page().into_any()
            }
        }
    };
}

route!(RunDetail, pages::run_detail::RunDetailPage);
route!(Traces, pages::traces::TracesPage);
route!(Compare, pages::compare::ComparePage);
route!(CompareRuns, pages::compare_runs::CompareRunsPage);
