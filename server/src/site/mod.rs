//! The dashboard's own files (wasm, JS, CSS, the favicon): sealed into the binary
//! ([`sealed`]), or read from a site directory (`--site-dir`, `make dev`, and a
//! binary built without `make build`).

mod files;
pub mod sealed;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use axum::http::{header, HeaderValue};
use axum::middleware;
use axum::response::Response;
use axum::Router;
use tower_http::services::ServeDir;

use crate::failure::Outcome;
pub use files::Files;

/// The bundle's directory under the site root.
pub const PKG_DIR: &str = "pkg";

/// Where `treeline-bundle` writes the build id, beside the bundle.
const BUILD_FILE: &str = "treeline.build";

/// The route chunks' preload lists, which `treeline-bundle` writes beside them.
const SPLIT_MANIFEST: &str = "__wasm_split_manifest.json";

/// Where the pages' files come from.
#[derive(Clone)]
pub enum Site {
    /// Sealed into this binary: served from memory.
    Sealed(Arc<Files>),
    /// A directory, read as requests come.
    Dir(PathBuf),
}

impl Site {
    /// `dir` when given; else what this binary carries; else the directory beside it
    /// (`target/site` for `target/<profile>/treeline`).
    pub fn locate(dir: Option<PathBuf>) -> Outcome<Site> {
        if let Some(dir) = dir {
            return Ok(Site::Dir(dir));
        }
        let exe = std::env::current_exe().ok();
        if let Some(exe) = exe.as_deref() {
            if let Some(files) = sealed::read(exe)? {
                // The seal rewrites the binary, so its time is the files' time.
                let sealed_at = std::fs::metadata(exe)
                    .and_then(|m| m.modified())
                    .unwrap_or_else(|_| std::time::SystemTime::now());
                return Ok(Site::Sealed(Arc::new(Files::new(files, sealed_at))));
            }
        }
        Ok(Site::Dir(default_dir()))
    }

    /// For the log: where the pages' files come from.
    pub fn describe(&self) -> String {
        match self {
            Site::Sealed(files) => format!("sealed in the binary ({} files)", files.len()),
            Site::Dir(dir) => dir.display().to_string(),
        }
    }

    /// The site root Leptos reads files from. A sealed site has none: a path under
    /// `/dev/null` can never exist, so no file of the working directory is ever served.
    pub fn leptos_root(&self) -> String {
        match self {
            Site::Sealed(_) => "/dev/null/treeline-site".into(),
            Site::Dir(dir) => dir.to_string_lossy().into_owned(),
        }
    }

    /// The files at the top of the site (not its folders) as paths: `/favicon.svg`.
    pub fn top_files(&self) -> Vec<String> {
        match self {
            Site::Sealed(files) => files
                .names()
                .filter(|name| !name.contains('/'))
                .map(|name| format!("/{name}"))
                .collect(),
            Site::Dir(dir) => std::fs::read_dir(dir)
                .map(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
                        .filter_map(|entry| entry.file_name().into_string().ok())
                        .map(|name| format!("/{name}"))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The route chunks' preload lists of a sealed bundle (Leptos reads a
    /// directory's own).
    pub fn split_manifest(&self) -> Option<HashMap<String, Vec<String>>> {
        let Site::Sealed(files) = self else {
            return None;
        };
        serde_json::from_slice(files.get(&format!("{PKG_DIR}/{SPLIT_MANIFEST}"))?).ok()
    }

    /// The browser bundle's files. `make build` writes a `.br` and a `.gz` copy
    /// beside each, sent to a browser that accepts brotli or gzip; the answer varies
    /// by Accept-Encoding, so a shared cache keeps each. The main module and the
    /// route chunks must come from one build, and a chunk's name does not change with
    /// its code: a browser revalidates each file (a 304 while it is unchanged)
    /// instead of running one kept from an earlier build. Each file names the
    /// bundle's build, so a page left open across a redeploy is loaded whole rather
    /// than run a chunk of the new build beside its old main module.
    pub fn bundle(&self) -> Router {
        let (router, build) = match self {
            Site::Sealed(files) => (
                files::dir_router(files.clone(), PKG_DIR),
                files
                    .get(&format!("{PKG_DIR}/{BUILD_FILE}"))
                    .map(<[u8]>::to_vec),
            ),
            Site::Dir(dir) => {
                let pkg = dir.join(PKG_DIR);
                let served = ServeDir::new(&pkg).precompressed_br().precompressed_gzip();
                (
                    Router::new().fallback_service(served),
                    std::fs::read(pkg.join(BUILD_FILE)).ok(),
                )
            }
        };
        // None for a bundle not split by route (`make dev`'s): its pages load no chunks.
        let build = build.and_then(|b| HeaderValue::from_bytes(b.trim_ascii()).ok());
        router.layer(middleware::map_response(move |mut response: Response| {
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

    /// The sealed site's top files (the favicon), each on its own route; a
    /// directory's are answered by the pages' fallback.
    pub fn top_routes(&self) -> Router {
        match self {
            Site::Sealed(files) => files::top_routes(files),
            Site::Dir(_) => Router::new(),
        }
    }
}

/// The header that names the bundle's build; the chunk loader compares it with its own.
const BUILD_HEADER: header::HeaderName = header::HeaderName::from_static("x-treeline-build");

/// Beside the binary when it is `target/<profile>/treeline`, else this checkout's.
fn default_dir() -> PathBuf {
    let beside_binary = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(|target| target.join("site")));
    match beside_binary {
        Some(dir) if dir.join(PKG_DIR).is_dir() => dir,
        _ => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/site")),
    }
}

/// This checkout's site directory, for the servers the benchmarks start.
pub fn default_site() -> Site {
    Site::Dir(default_dir())
}
