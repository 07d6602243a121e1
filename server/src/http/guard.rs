//! What keeps a browser from being used against the server: JSON bodies only with a
//! JSON Content-Type (a cross-site form cannot send one without a preflight), the
//! Host header checked on a keyless server (DNS rebinding), and headers that keep
//! pages out of frames and their URLs out of other sites' logs.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::{error_response, ApiError};
use super::AppState;

/// Write requests must say their body is JSON (`application/json`, any charset),
/// but for a DELETE with no body (`DELETE /api/runs/{run_id}`): no HTML form sends
/// that method, so it cannot come from another site without a CORS preflight.
pub async fn require_json(request: Request, next: Next) -> Result<Response, ApiError> {
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        return Ok(next.run(request).await);
    }
    let headers = request.headers();
    let header_text = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let content_type = header_text(header::CONTENT_TYPE);
    let bodiless_delete = *request.method() == Method::DELETE
        && content_type.is_empty()
        && matches!(header_text(header::CONTENT_LENGTH).as_str(), "" | "0")
        && !headers.contains_key(header::TRANSFER_ENCODING);
    if bodiless_delete || is_json(&content_type) {
        Ok(next.run(request).await)
    } else {
        Err(ApiError::UnsupportedMediaType(format!(
            "Content-Type must be application/json, not {:?}",
            content_type
        )))
    }
}

fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

/// Without API keys the server trusts whoever reaches it, which must then be this
/// machine: a Host that names anything but a loopback address or an allowed host is
/// a page of another site that rebound its name to us.
pub async fn check_host(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let foreign = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().host())
        // Browsers always send Host; a client without one is no browser.
        .filter(|host| !host_allowed(host, &state.allowed_hosts))
        .map(str::to_string);
    // Whether keys are asked for matters only for a host that is not allowed.
    let refused = match foreign {
        Some(host) => match super::auth::request_auth_on(&state, &mut request).await {
            Ok(on) => (!on).then_some(host),
            Err(e) => return e.into_response(),
        },
        None => None,
    };
    match refused {
        None => next.run(request).await,
        Some(host) => error_response(
            axum::http::StatusCode::FORBIDDEN,
            "host_not_allowed",
            format!(
                "this server has no API keys and answers only to loopback hosts; {host:?} is \
                 not one (add it with --allowed-host)"
            ),
        ),
    }
}

/// Whether `host` (as the Host header gives it, with or without a port) is a
/// loopback address, `localhost`, or one of `allowed`.
pub fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = strip_port(host);
    if name.eq_ignore_ascii_case("localhost") || name.to_ascii_lowercase().ends_with(".localhost") {
        return true;
    }
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()) {
        return true;
    }
    allowed.iter().any(|a| a.eq_ignore_ascii_case(name))
}

fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        // [::1]:3000
        return host
            .split_once("]:")
            .map_or(host, |(h, _)| &host[..h.len() + 1]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// The Content-Security-Policy of a page: scripts only from this server, the inline
/// hydration scripts only with this response's `nonce`, and wasm.
pub fn page_policy(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
         style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
         object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
}

/// The policy of every other answer (the sign-in page, static files, JSON): no
/// inline script at all.
const DEFAULT_POLICY: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Refuses a path or query string holding a NUL character (`%00`), naming the
/// parameter: PostgreSQL cannot compare text with one, and SQLite must answer alike.
pub async fn refuse_nul(request: Request, next: Next) -> Result<Response, ApiError> {
    let uri = request.uri();
    if uri.path().contains("%00") {
        return Err(ApiError::bad(
            "invalid_parameter",
            "the path contains a NUL character (%00)",
        ));
    }
    if let Some(query) = uri.query().filter(|q| q.contains("%00")) {
        let name = form_urlencoded::parse(query.as_bytes())
            .find(|(k, v)| k.contains('\0') || v.contains('\0'))
            .map(|(k, _)| k.replace('\0', "\\0"))
            .unwrap_or_default();
        return Err(ApiError::bad(
            "invalid_parameter",
            format!("query parameter {name:?} contains a NUL character (%00)"),
        ));
    }
    Ok(next.run(request).await)
}

/// Headers every answer carries: no MIME sniffing, never inside another site's
/// frame, a referrer only for this site, and a script policy (a page's own, with
/// its nonce, when rendering set one).
pub async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(DEFAULT_POLICY),
        );
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_pass_and_others_need_allowing() {
        let none: Vec<String> = Vec::new();
        for ok in [
            "127.0.0.1:3000",
            "127.0.0.1",
            "127.8.9.10:80",
            "localhost:3000",
            "LOCALHOST",
            "app.localhost:3000",
            "[::1]:3000",
            "[::1]",
        ] {
            assert!(host_allowed(ok, &none), "{ok}");
        }
        for bad in [
            "attacker.example",
            "attacker.example:3000",
            "10.0.0.1:3000",
            "[::2]:1",
        ] {
            assert!(!host_allowed(bad, &none), "{bad}");
        }
        let allowed = vec!["dash.internal".to_string()];
        assert!(host_allowed("dash.internal:3000", &allowed));
        assert!(!host_allowed("other.internal:3000", &allowed));
    }

    #[test]
    fn json_content_types_with_any_charset() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        assert!(!is_json("text/plain"));
        assert!(!is_json("application/x-www-form-urlencoded"));
        assert!(!is_json(""));
    }
}
