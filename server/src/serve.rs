//! Assembling and running the whole server: API, dashboard, static files.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use axum::middleware;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use leptos::prelude::*;
use leptos_axum::{generate_route_list, LeptosRoutes};
use tower_http::services::ServeDir;
use tower_http::trace::TraceLayer;
use treeline_app::{shell, App, SharedBackend};
use treeline_wire::routes;

use crate::http::auth::Principal;
use crate::http::{self, AppState};
use crate::ssr::ApiBackend;

/// Where the built dashboard (wasm, js, css, assets) lives: beside the binary when
/// installed as `target/<profile>/treeline`, so the server runs from any directory.
pub fn default_site_root() -> PathBuf {
    let beside_binary = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(|target| target.join("site")));
    match beside_binary {
        Some(dir) if dir.join("pkg").is_dir() => dir,
        _ => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/site")),
    }
}

/// The full application router: the open edges (health, sign-in, static files),
/// the API and OTLP behind `auth::api_door`, and the pages behind `auth::page_door`.
pub fn app(state: AppState, site_root: &std::path::Path, addr: SocketAddr) -> Router {
    let otlp = crate::otlp::router(state.clone());
    let options = LeptosOptions::builder()
        .output_name("treeline")
        .site_root(site_root.to_string_lossy().as_ref())
        .site_pkg_dir(PKG_DIR)
        .site_addr(addr)
        .build();
    let api = http::router(state.clone());
    let page_context = {
        let api = api.clone();
        move || page_context(&api)
    };
    let routes = generate_route_list(App);
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
            http::auth::PageDoor::new(state.clone(), site_root),
            http::auth::page_door,
        ))
        .layer(middleware::from_fn(crate::ssr::render_to_the_end))
        .with_state(options);
    Router::new()
        .route(routes::HEALTH, get(|| async { "ok" }))
        .nest_service(&format!("/{PKG_DIR}"), bundle(&site_root.join(PKG_DIR)))
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

/// The bundle's directory under the site root.
const PKG_DIR: &str = "pkg";

/// The browser bundle's files. `make build` writes a `.br` and a `.gz` copy beside
/// each, sent to a browser that accepts brotli or gzip; the answer varies by
/// Accept-Encoding, so a shared cache keeps each. The main module and the route chunks must come from one build, and a
/// chunk's name does not change with its code: a browser revalidates each file (a
/// 304 while it is unchanged) instead of running one kept from an earlier build.
/// Each file names the bundle's build, so a page left open across a redeploy is
/// loaded whole rather than run a chunk of the new build beside its old main module.
fn bundle(dir: &std::path::Path) -> Router {
    let build = build_id(dir);
    Router::new()
        .fallback_service(ServeDir::new(dir).precompressed_br().precompressed_gzip())
        .layer(middleware::map_response(move |mut response: Response| {
            let build = build.clone();
            async move {
                let headers = response.headers_mut();
                headers.append(header::VARY, HeaderValue::from_static("accept-encoding"));
                headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
                if let Some(build) = build {
                    headers.insert(BUILD_HEADER, build);
                }
                response
            }
        }))
}

/// The header that names the bundle's build; the chunk loader compares it with its own.
const BUILD_HEADER: header::HeaderName = header::HeaderName::from_static("x-treeline-build");

/// Where `treeline-bundle` writes the build id, beside the bundle.
const BUILD_FILE: &str = "treeline.build";

/// The bundle's build id; none for a bundle that is not split by route (`make
/// dev`'s), whose pages load no chunks.
fn build_id(dir: &std::path::Path) -> Option<HeaderValue> {
    let text = std::fs::read_to_string(dir.join(BUILD_FILE)).ok()?;
    HeaderValue::from_str(text.trim()).ok()
}

/// What rendering a page needs: the API, called in-process as the page's own caller,
/// and the page's script policy with this response's nonce.
fn page_context(api: &Router) {
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
