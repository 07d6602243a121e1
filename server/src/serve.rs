//! Assembling and running the whole server: API, dashboard, static files.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use axum::middleware;
use axum::routing::get;
use axum::Router;
use leptos::prelude::*;
use leptos::reactive::owner::ArcStoredValue;
use leptos::WasmSplitManifest;
use leptos_axum::{generate_route_list, AxumRouteListing, LeptosRoutes};
use tower_http::trace::TraceLayer;
use treeline_app::{shell, App, SharedBackend};
use treeline_wire::routes;

use crate::http::auth::Principal;
use crate::http::{self, AppState};
use crate::site::{Site, PKG_DIR};
use crate::ssr::ApiBackend;

/// The full application router: the open edges (health, sign-in, static files),
/// the API and OTLP behind `auth::api_door`, and the pages behind `auth::page_door`.
pub fn app(state: AppState, site: &Site, addr: SocketAddr) -> Router {
    let otlp = crate::otlp::router(state.clone());
    let options = LeptosOptions::builder()
        .output_name("treeline")
        .site_root(site.leptos_root())
        .site_pkg_dir(PKG_DIR)
        .site_addr(addr)
        .build();
    let api = http::router(state.clone());
    let splits = site.split_manifest().map(|preloads| {
        WasmSplitManifest(ArcStoredValue::new((
            format!("/{PKG_DIR}"),
            preloads,
            SPLIT_LOADER.to_string(),
        )))
    });
    let page_context = {
        let api = api.clone();
        move || page_context(&api, splits.clone())
    };
    let routes = page_routes();
    let pages = Router::new()
        .leptos_routes_with_context(&options, routes, page_context.clone(), {
            let options = options.clone();
            move || shell(options.clone())
        })
        .fallback(leptos_axum::file_and_error_handler_with_context(
            page_context,
            shell,
        ))
        // A layer, not a route layer: the fallback's unknown paths need sign-in too.
        .layer(middleware::from_fn_with_state(
            http::auth::PageDoor::new(state.clone(), site.top_files()),
            http::auth::page_door,
        ))
        .layer(middleware::from_fn(crate::ssr::render_to_the_end))
        .with_state(options);
    Router::new()
        .route(routes::HEALTH, get(|| async { "ok" }))
        .nest_service(&format!("/{PKG_DIR}"), site.bundle())
        .merge(site.top_routes())
        .merge(http::signin::router(state.clone()))
        .merge(otlp)
        .nest(routes::API_PREFIX, api)
        .merge(pages)
        .layer(middleware::from_fn(http::guard::refuse_nul))
        .layer(middleware::from_fn_with_state(
            state,
            http::guard::check_host,
        ))
        // Outermost, so even a refused Host gets the headers.
        .layer(middleware::from_fn(http::guard::security_headers))
        .layer(TraceLayer::new_for_http().make_span_with(|req: &axum::http::Request<_>| {
            tracing::info_span!("request", method = %req.method(), path = %req.uri().path())
        }).on_response(tower_http::trace::DefaultOnResponse::new().level(tracing::Level::INFO)))
}

/// The dashboard's pages, listed once per process. Listing them runs the app with
/// resource loading suppressed by a process-wide flag, so a page rendering on
/// another thread meanwhile would wait forever on its data (leptos#4773); in-process
/// tests build many routers beside pages being rendered.
pub fn page_routes() -> Vec<AxumRouteListing> {
    static ROUTES: std::sync::OnceLock<Vec<AxumRouteListing>> = std::sync::OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(App)).clone()
}

/// The route chunks' loader, under the name `treeline-bundle` gives it.
const SPLIT_LOADER: &str = "__wasm_split.______________________.js";

/// What rendering a page needs: the API, called in-process as the page's own caller,
/// and the page's script policy with this response's nonce.
fn page_context(api: &Router, splits: Option<WasmSplitManifest>) {
    // A sealed bundle's chunk preloads (Leptos reads a site directory's itself).
    if let Some(splits) = splits {
        provide_context(splits);
    }
    let caller = use_context::<Parts>().and_then(|p| p.extensions.get::<Principal>().cloned());
    let backend: SharedBackend = Arc::new(ApiBackend {
        api: api.clone(),
        caller,
    });
    provide_context(backend);
    if let (Some(nonce), Some(response)) = (
        leptos::nonce::use_nonce(),
        use_context::<leptos_axum::ResponseOptions>(),
    ) {
        if let Ok(policy) = HeaderValue::from_str(&http::guard::page_policy(&nonce)) {
            response.insert_header(header::CONTENT_SECURITY_POLICY, policy);
        }
    }
}

/// Serves until SIGTERM or ctrl-c, letting requests in flight finish.
pub async fn run(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    // With the peer's address, which sign-in's throttle counts by.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown_signal())
    .await
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down: finishing requests in flight");
}
