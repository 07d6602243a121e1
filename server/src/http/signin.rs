//! Signing in from a browser: `GET /login` is a plain HTML form that works before
//! any script loads; `POST /login` trades a key for a session cookie kept
//! server-side; `POST /logout` ends it. After signing in the browser goes back to
//! `next`, the very page it first asked for.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;

use axum::body::to_bytes;
use axum::extract::{ConnectInfo, RawQuery, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;

use super::auth::{self, Via, LOGIN};
use super::error::{ApiError, ApiResult};
use super::{now_us, secret, AppState};

pub const LOGOUT: &str = "/logout";
/// How long a session lasts.
pub const SESSION_TTL_S: i64 = 7 * 24 * 3600;
/// A sign-in form is a key and a path: anything longer is not one.
const FORM_MAX_BYTES: usize = 16 * 1024;

pub fn router(state: AppState) -> Router {
    Router::new()
        .route(LOGIN, get(login_page).post(login))
        .route(LOGOUT, post(logout))
        .with_state(state)
}

/// `next` if it is a path on this server, else `/`: never another site (no open
/// redirect), and never the sign-in page itself.
pub fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && n.bytes().all(|b| b.is_ascii_graphic() && b != b'\\')
                && !n.starts_with(LOGIN) =>
        {
            n
        }
        _ => "/",
    }
}

fn query_next(raw: Option<&str>) -> String {
    let next = raw.and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "next")
            .map(|(_, v)| v.into_owned())
    });
    safe_next(next.as_deref()).to_string()
}

async fn login_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> ApiResult<Response> {
    let next = query_next(raw.as_deref());
    if !auth::auth_on(&state).await? || signed_in(&state, &headers).await? {
        return Ok(Redirect::to(&next).into_response());
    }
    Ok(form(StatusCode::OK, &next, None))
}

/// Whether the browser's session still names a caller, by the same rule the
/// doors apply (a session of a revoked key, or of a key no longer given to `serve`,
/// is none: counting it here would send the browser back and forth).
async fn signed_in(state: &AppState, headers: &HeaderMap) -> ApiResult<bool> {
    match secret::session_token(headers, auth::secure(state, headers)) {
        Some(token) => Ok(auth::session_principal(state, token).await?.is_some()),
        None => Ok(false),
    }
}

async fn login(State(state): State<AppState>, request: Request) -> ApiResult<Response> {
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    // The peer's address (a proxy in front counts as one client); none where the
    // router is called in-process, as tests do.
    let client = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
    let form_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            v.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !form_type {
        return Err(ApiError::UnsupportedMediaType(
            "sign in with a form: Content-Type application/x-www-form-urlencoded".into(),
        ));
    }
    // Another site's page must not sign this browser in to a key of its choosing.
    if has_site_headers(&headers) && !secret::same_site(&headers) {
        return Err(cross_site());
    }
    let bytes = to_bytes(body, FORM_MAX_BYTES)
        .await
        .map_err(|_| ApiError::TooLarge {
            code: "payload_too_large",
            message: format!("a sign-in form is at most {FORM_MAX_BYTES} bytes"),
        })?;
    let (mut key, mut next) = (String::new(), None);
    for (name, value) in form_urlencoded::parse(&bytes) {
        match name.as_ref() {
            "key" => key = value.trim().to_string(),
            "next" => next = Some(value.into_owned()),
            _ => {}
        }
    }
    let next = safe_next(next.as_deref()).to_string();
    if key.is_empty() {
        return Ok(form(
            StatusCode::BAD_REQUEST,
            &next,
            Some("Enter an API key."),
        ));
    }
    if let Some(wait) = state.signin_throttle.wait(client, Instant::now()) {
        return Ok(throttled(&next, wait.as_secs_f64().ceil() as u32));
    }
    let Some(principal) = auth::key_principal(&state, &key, Via::Session).await? else {
        if let Some(wait) = state.signin_throttle.failed(client, Instant::now()) {
            tracing::warn!(
                %client,
                wait_s = wait.as_secs(),
                "repeated failed sign-ins: this address waits before its next try"
            );
        }
        return Ok(form(
            StatusCode::UNAUTHORIZED,
            &next,
            Some("That key is not valid. Check it, or ask for a new one."),
        ));
    };
    state.signin_throttle.succeeded(client);
    let token = secret::random(32).map_err(|e| ApiError::Internal(Box::new(e)))?;
    let now = now_us();
    state
        .store
        .access()
        .create_session(
            &secret::digest(&token),
            &principal.key_id,
            now,
            now.saturating_add(SESSION_TTL_S * 1_000_000),
        )
        .await?;
    let mut response = Redirect::to(&next).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        secret::cookie(&token, SESSION_TTL_S, auth::secure(&state, &headers)),
    );
    Ok(response)
}

/// The form again, with 429 and how long to wait: too many failures from this address.
fn throttled(next: &str, retry_after_s: u32) -> Response {
    let retry_after_s = retry_after_s.max(1);
    let mut response = form(
        StatusCode::TOO_MANY_REQUESTS,
        next,
        Some(&format!(
            "Too many keys that were not valid came from this address. Try again in {retry_after_s} s."
        )),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
    response
}

async fn logout(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    if !secret::same_site(&headers) {
        return Err(cross_site());
    }
    let secure = auth::secure(&state, &headers);
    if let Some(token) = secret::session_token(&headers, secure) {
        state
            .store
            .access()
            .end_session(&secret::digest(token))
            .await?;
    }
    // Both names are cleared: the one this request read, and the other, left by a
    // sign-in that reached the server the other way (over http, or through the proxy).
    let mut response = Redirect::to(LOGIN).into_response();
    for secure in [secure, !secure] {
        response
            .headers_mut()
            .append(header::SET_COOKIE, secret::cookie("", 0, secure));
    }
    Ok(response)
}

fn has_site_headers(headers: &HeaderMap) -> bool {
    headers.contains_key(header::ORIGIN) || headers.contains_key("sec-fetch-site")
}

fn cross_site() -> ApiError {
    ApiError::forbidden(
        "cross_site_request",
        "this form must be sent from a page of this site",
    )
}

/// The sign-in page. Plain HTML and the dashboard's stylesheet: no script needed.
fn form(status: StatusCode, next: &str, problem: Option<&str>) -> Response {
    let problem = problem
        .map(|p| {
            format!(
                r#"<p class="signin-problem" role="alert">{}</p>"#,
                escape(p)
            )
        })
        .unwrap_or_default();
    let page = format!(
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · Treeline</title>
<link rel="icon" type="image/svg+xml" href="/favicon.svg">
<link rel="stylesheet" href="/pkg/treeline.css">
</head>
<body>
<header class="topbar"><a class="brand" href="/">Treeline</a></header>
<main class="signin">
<form method="post" action="{LOGIN}">
<h1>Sign in</h1>
<p class="muted">This Treeline server needs an API key. Any key works here; a read key is enough to look around.</p>
{problem}
<label for="key">API key</label>
<input id="key" name="key" type="password" autocomplete="current-password" required autofocus>
<input type="hidden" name="next" value="{next}">
<button type="submit">Sign in</button>
</form>
</main>
</body>
</html>"#,
        next = escape(next),
    );
    let mut response = (status, Html(page)).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::auth::login_path;
    use super::*;

    #[test]
    fn next_is_only_ever_a_path_here() {
        assert_eq!(
            safe_next(Some("/traces?run_id=r&span_id=s")),
            "/traces?run_id=r&span_id=s"
        );
        assert_eq!(safe_next(Some("/runs/r%201")), "/runs/r%201");
        for bad in [
            "https://evil.example/",
            "//evil.example/x",
            "/\\evil.example",
            "evil.example",
            "/login?next=/x",
            "/a b",
            "/a\r\nSet-Cookie: x",
            "",
        ] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn the_path_asked_for_comes_back_whole() {
        let asked = "/traces?run_id=r1&trace_id=t&span_id=s";
        let path = login_path(asked);
        assert_eq!(query_next(path.split_once('?').map(|(_, q)| q)), asked);
    }

    #[test]
    fn the_form_escapes_what_it_echoes() {
        assert_eq!(
            escape(r#"/x?a="><script>"#),
            "/x?a=&quot;&gt;&lt;script&gt;"
        );
    }
}
