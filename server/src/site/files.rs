//! A sealed site's files, answered from memory as a directory would be: the
//! brotli or gzip copy to a browser that accepts it, an ETag and a Last-Modified,
//! and a 304 when the browser's copy is current.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;

use super::sealed;

struct File {
    data: Bytes,
    etag: HeaderValue,
}

/// The sealed files by their path under the site root ("pkg/treeline.js"), and
/// when they were sealed (every file changes only with the binary).
pub struct Files {
    files: HashMap<String, File>,
    sealed_at: SystemTime,
    last_modified: HeaderValue,
}

impl Files {
    pub fn new(files: sealed::Files, sealed_at: SystemTime) -> Self {
        // Whole seconds, as the header carries them, so If-Modified-Since compares.
        let secs = sealed_at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let sealed_at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        let last_modified = HeaderValue::from_str(&httpdate::fmt_http_date(sealed_at))
            .unwrap_or_else(|_| HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"));
        let files = files
            .into_iter()
            .filter_map(|(name, data)| {
                let hash = xxhash_rust::xxh3::xxh3_128(&data);
                let etag = HeaderValue::from_str(&format!("\"{hash:032x}\"")).ok()?;
                Some((
                    name,
                    File {
                        data: Bytes::from(data),
                        etag,
                    },
                ))
            })
            .collect();
        Files {
            files,
            sealed_at,
            last_modified,
        }
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.files.get(name).map(|f| &f.data[..])
    }

    /// Whether the browser's copy is current: by ETag when it sends one (which then
    /// decides alone), else by date.
    fn is_current(&self, headers: &HeaderMap, etag: &HeaderValue) -> bool {
        if let Some(tags) = headers.get(header::IF_NONE_MATCH) {
            return matches(tags, etag);
        }
        headers
            .get(header::IF_MODIFIED_SINCE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v).ok())
            .is_some_and(|since| self.sealed_at <= since)
    }

    /// `name` as the browser asked for it: GET or HEAD, compressed when it can be.
    fn respond(&self, name: &str, method: &Method, headers: &HeaderMap) -> Response {
        if method != Method::GET && method != Method::HEAD {
            return StatusCode::METHOD_NOT_ALLOWED.into_response();
        }
        let Some(plain) = self.files.get(name) else {
            return StatusCode::NOT_FOUND.into_response();
        };
        let accepted = accepted_encodings(headers);
        let (file, encoding) = [("br", ".br"), ("gzip", ".gz")]
            .into_iter()
            .filter(|(coding, _)| accepted.contains(coding))
            .find_map(|(coding, ext)| {
                Some((self.files.get(&format!("{name}{ext}"))?, Some(coding)))
            })
            .unwrap_or((plain, None));
        let mut response = if self.is_current(headers, &file.etag) {
            StatusCode::NOT_MODIFIED.into_response()
        } else if method == Method::HEAD {
            let mut r = Response::new(Body::empty());
            r.headers_mut()
                .insert(header::CONTENT_LENGTH, file.data.len().into());
            r
        } else {
            Response::new(Body::from(file.data.clone()))
        };
        let out = response.headers_mut();
        out.insert(header::ETAG, file.etag.clone());
        out.insert(header::LAST_MODIFIED, self.last_modified.clone());
        out.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(content_type(name)),
        );
        if let Some(coding) = encoding {
            out.insert(header::CONTENT_ENCODING, HeaderValue::from_static(coding));
        }
        response
    }
}

/// The codings named in Accept-Encoding with a weight above zero.
fn accepted_encodings(headers: &HeaderMap) -> Vec<&'static str> {
    let mut out = Vec::new();
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        let Ok(text) = value.to_str() else { continue };
        for item in text.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or_default().trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            match coding {
                _ if refused => {}
                "br" => out.push("br"),
                "gzip" => out.push("gzip"),
                _ => {}
            }
        }
    }
    out
}

/// Whether If-None-Match names `etag` (or is `*`).
fn matches(tags: &HeaderValue, etag: &HeaderValue) -> bool {
    let (Ok(tags), Ok(etag)) = (tags.to_str(), etag.to_str()) else {
        return false;
    };
    tags.split(',')
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == "*" || t == etag)
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map_or("", |(_, ext)| ext) {
        "wasm" => "application/wasm",
        "js" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "json" => "application/json",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "txt" | "build" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// The files under `dir`, to nest at `/{dir}`.
pub(super) fn dir_router(files: Arc<Files>, dir: &'static str) -> Router {
    Router::new()
        .fallback(
            move |State(files): State<Arc<Files>>, request: Request| async move {
                let name = format!("{dir}{}", request.uri().path());
                files.respond(&name, request.method(), request.headers())
            },
        )
        .with_state(files)
}

/// The files at the top of the site, each on its own route.
pub(super) fn top_routes(files: &Arc<Files>) -> Router {
    let mut router = Router::new();
    for name in files.names().filter(|n| !n.contains('/')) {
        let (files, owned) = (files.clone(), name.to_string());
        router = router.route(
            &format!("/{name}"),
            get(move |request: Request| async move {
                files.respond(&owned, request.method(), request.headers())
            }),
        );
    }
    router
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Files {
        let mut f = sealed::Files::new();
        f.insert("pkg/a.js".into(), b"plain".to_vec());
        f.insert("pkg/a.js.br".into(), b"brotli".to_vec());
        f.insert("pkg/a.js.gz".into(), b"gzip".to_vec());
        f.insert("pkg/b.wasm".into(), b"wasm".to_vec());
        Files::new(
            f,
            SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000),
        )
    }

    fn ask(files: &Files, name: &str, pairs: &[(header::HeaderName, &str)]) -> Response {
        let mut headers = HeaderMap::new();
        for (k, v) in pairs {
            headers.append(k, HeaderValue::from_str(v).unwrap());
        }
        files.respond(name, &Method::GET, &headers)
    }

    fn coding(r: &Response) -> Option<&str> {
        r.headers()
            .get(header::CONTENT_ENCODING)
            .map(|v| v.to_str().unwrap())
    }

    #[test]
    fn the_best_accepted_copy_goes_out() {
        let f = files();
        let enc = header::ACCEPT_ENCODING;
        assert_eq!(
            coding(&ask(&f, "pkg/a.js", &[(enc.clone(), "gzip, deflate, br")])),
            Some("br")
        );
        assert_eq!(
            coding(&ask(&f, "pkg/a.js", &[(enc.clone(), "gzip, br;q=0")])),
            Some("gzip")
        );
        assert_eq!(coding(&ask(&f, "pkg/a.js", &[])), None);
        // A file without compressed copies goes out as it is.
        assert_eq!(coding(&ask(&f, "pkg/b.wasm", &[(enc, "br")])), None);
        let wasm = ask(&f, "pkg/b.wasm", &[]);
        assert_eq!(wasm.headers()[header::CONTENT_TYPE], "application/wasm");
        assert_eq!(
            ask(&f, "pkg/missing.js", &[]).status(),
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn a_copy_dated_at_or_after_the_seal_is_current_unless_an_etag_says_otherwise() {
        let f = files();
        let first = ask(&f, "pkg/b.wasm", &[]);
        let date = first.headers()[header::LAST_MODIFIED]
            .to_str()
            .unwrap()
            .to_string();
        assert_eq!(date, "Tue, 14 Nov 2023 22:13:20 GMT");
        let again = ask(&f, "pkg/b.wasm", &[(header::IF_MODIFIED_SINCE, &date)]);
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        let older = "Tue, 14 Nov 2023 22:13:19 GMT";
        let stale = ask(&f, "pkg/b.wasm", &[(header::IF_MODIFIED_SINCE, older)]);
        assert_eq!(stale.status(), StatusCode::OK);
        let both = [
            (header::IF_MODIFIED_SINCE, date.as_str()),
            (header::IF_NONE_MATCH, "\"0\""),
        ];
        assert_eq!(ask(&f, "pkg/b.wasm", &both).status(), StatusCode::OK);
    }

    #[test]
    fn a_current_copy_is_answered_304_and_a_stale_one_200() {
        let f = files();
        let first = ask(&f, "pkg/b.wasm", &[]);
        let tag = first.headers()[header::ETAG].to_str().unwrap().to_string();
        let again = ask(&f, "pkg/b.wasm", &[(header::IF_NONE_MATCH, &tag)]);
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        let stale = ask(&f, "pkg/b.wasm", &[(header::IF_NONE_MATCH, "\"0\"")]);
        assert_eq!(stale.status(), StatusCode::OK);
        let post = f.respond("pkg/b.wasm", &Method::POST, &HeaderMap::new());
        assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
    }
}
