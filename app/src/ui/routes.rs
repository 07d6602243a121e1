//! The pages past the first, as routes whose views load on first visit. In the
//! release bundle (built with `--cfg treeline_split`) each view is its own wasm
//! chunk, so the runs list does not carry the workspace, Run Detail or Compare.
//! Elsewhere (`make dev`, which does not split) the same routes are plain code: a
//! lazy view in an unsplit bundle would import a module that does not exist. The
//! server always takes the lazy form, which names each chunk so a deep link's page
//! preloads it.

use leptos::prelude::*;

use super::pages;

/// A route, and its view as plain code where this build does not split.
macro_rules! route_view {
    ($route:ident, $page:expr) => {
        #[derive(Clone, Copy)]
        pub(crate) struct $route;

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

route_view!(RunDetail, pages::run_detail::RunDetailPage);
route_view!(Traces, pages::traces::TracesPage);
route_view!(Compare, pages::compare::ComparePage);

// Written out, not generated: a chunk's name comes from where its `lazy_route` is.

#[cfg(any(feature = "ssr", treeline_split))]
#[leptos_router::lazy_route]
impl leptos_router::LazyRoute for RunDetail {
    fn data() -> Self {
        RunDetail
    }

    fn view(_this: Self) -> AnyView {
        pages::run_detail::RunDetailPage().into_any()
    }
}

#[cfg(any(feature = "ssr", treeline_split))]
#[leptos_router::lazy_route]
impl leptos_router::LazyRoute for Traces {
    fn data() -> Self {
        Traces
    }

    fn view(_this: Self) -> AnyView {
        pages::traces::TracesPage().into_any()
    }
}

#[cfg(any(feature = "ssr", treeline_split))]
#[leptos_router::lazy_route]
impl leptos_router::LazyRoute for Compare {
    fn data() -> Self {
        Compare
    }

    fn view(_this: Self) -> AnyView {
        pages::compare::ComparePage().into_any()
    }
}
