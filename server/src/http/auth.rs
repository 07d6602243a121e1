//! Who is asking, and what they may do. Auth is on when any key exists (given to
//! `serve` or stored with `treeline keys create`), or when the server listens beyond
//! loopback; then every API call needs a key (`Authorization: Bearer`) or a session
//! cookie, and every page a signed-in browser.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use super::error::{ApiError, ApiResult};
use super::{now_us, secret, AppState};
use crate::store::KeyRecord;

/// What a key may do. `Write` includes reading; `Admin` is `Write` over every
/// project, always.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Read,
    Write,
    Admin,
}

impl Scope {
    pub fn parse(text: &str) -> Option<Scope> {
        match text {
            "read" => Some(Scope::Read),
            "write" => Some(Scope::Write),
            "admin" => Some(Scope::Admin),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    pub fn writes(self) -> bool {
        self != Scope::Read
    }
}

/// How the caller proved who it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// Nobody needs to: auth is off (a keyless loopback server).
    Open,
    /// An `Authorization: Bearer` key.
    Key,
    /// A session cookie from `/login`.
    Session,
}

/// The caller of a request, put in its extensions by the door it came through.
#[derive(Clone, Debug)]
pub struct Principal {
    pub key_id: String,
    pub name: String,
    pub scope: Scope,
    /// The one project this caller sees; `None` for every project.
    pub project: Option<String>,
    pub via: Via,
}

/// The key id of a session opened with a key given to `serve`: not stored, so it
/// is named by its digest, and ends when the key is no longer given.
const CONFIGURED: &str = "config:";
/// How often a key's "last used" is written at most.
const TOUCH_EVERY_US: i64 = 60 * 1_000_000;

impl Principal {
    fn open() -> Self {
        Principal {
            key_id: String::new(),
            name: String::new(),
            scope: Scope::Admin,
            project: None,
            via: Via::Open,
        }
    }

    fn configured(digest: &str, via: Via) -> Self {
        Principal {
            key_id: format!("{CONFIGURED}{}", &digest[..16]),
            name: "server key".into(),
            scope: Scope::Admin,
            project: None,
            via,
        }
    }

    fn stored(key: KeyRecord, via: Via) -> Self {
        Principal {
            scope: Scope::parse(&key.scope).unwrap_or(Scope::Read),
            key_id: key.id,
            name: key.name,
            project: key.project,
            via,
        }
    }

    /// Whether this caller may see `project`.
    pub fn sees(&self, project: &str) -> bool {
        self.project.as_deref().is_none_or(|p| p == project)
    }
}

/// Whether requests need credentials now. Asked per request, so a key created while
/// the server runs turns auth on at once.
pub async fn auth_on(state: &AppState) -> ApiResult<bool> {
    let on =
        state.require_auth || !state.api_keys.is_empty() || state.store.access().any_key().await?;
    note_auth(state, on);
    Ok(on)
}

/// Logs a change of whether requests need credentials, once per change: the last
/// stored key revoked opens a loopback server.
fn note_auth(state: &AppState, on: bool) {
    let seen = state.auth_seen.swap(u8::from(on) + 1, Ordering::Relaxed);
    if seen == 2 && !on {
        tracing::warn!(
            "no API key works any more (the last stored key was revoked): this server now \
             answers everyone who reaches it without a key"
        );
    } else if seen == 1 && on {
        tracing::info!("a key was created: this server now asks for credentials");
    }
}

/// The answer of [`auth_on`] for one request, kept in its extensions by the first
/// layer that asks, so a request costs one lookup.
#[derive(Clone, Copy, Debug)]
pub struct AuthOn(pub bool);

/// [`auth_on`] for `request`, asked once.
pub async fn request_auth_on(state: &AppState, request: &mut Request) -> ApiResult<bool> {
    if let Some(AuthOn(on)) = request.extensions().get::<AuthOn>() {
        return Ok(*on);
    }
    let on = auth_on(state).await?;
    request.extensions_mut().insert(AuthOn(on));
    Ok(on)
}

/// The caller a request's credentials name: `None` without any, 401 for a key
/// that is not valid. A session that expired or whose key was revoked is no
/// credential at all.
async fn identify(state: &AppState, headers: &HeaderMap) -> ApiResult<Option<Principal>> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let key = value.to_str().ok().and_then(bearer).ok_or_else(|| {
            ApiError::Unauthorized("the Authorization header must be `Bearer <key>`".into())
        })?;
        return match key_principal(state, key, Via::Key).await? {
            Some(p) => Ok(Some(p)),
            None => Err(ApiError::Unauthorized("the API key is not valid".into())),
        };
    }
    match secret::session_token(headers, secure(state, headers)) {
        Some(token) => session_principal(state, token).await,
        None => Ok(None),
    }
}

/// Whether the session cookie is `Secure` for this request: the server was told the
/// dashboard is reached over https, or a TLS proxy says this request was.
pub fn secure(state: &AppState, headers: &HeaderMap) -> bool {
    state.secure_cookies || secret::forwarded_https(headers)
}

/// The caller `key` names, if it is a key given to `serve` or a stored one.
pub async fn key_principal(state: &AppState, key: &str, via: Via) -> ApiResult<Option<Principal>> {
    let digest = secret::digest(key);
    if is_configured(state, &digest) {
        return Ok(Some(Principal::configured(&digest, via)));
    }
    let Some(record) = state.store.access().key_by_digest(&digest).await? else {
        return Ok(None);
    };
    touch(state, &record);
    Ok(Some(Principal::stored(record, via)))
}

/// Whether `digest` is that of a key given to `serve`, compared in constant time:
/// neither the time taken nor an early return tells how much of a guess was right.
fn is_configured(state: &AppState, digest: &str) -> bool {
    state.api_keys.iter().fold(false, |found, known| {
        found | secret::same(&secret::digest(known), digest)
    })
}

/// The caller a session cookie's token stands for: `None` when the session expired,
/// or its key was revoked or is no longer given to `serve`.
pub(super) async fn session_principal(
    state: &AppState,
    token: &str,
) -> ApiResult<Option<Principal>> {
    let Some(session) = state
        .store
        .access()
        .session(&secret::digest(token), now_us())
        .await?
    else {
        return Ok(None);
    };
    if let Some(key) = session.key {
        touch(state, &key);
        return Ok(Some(Principal::stored(key, Via::Session)));
    }
    // A configured key's session lives only while that key is still given.
    let still_given = state.api_keys.iter().find_map(|known| {
        let digest = secret::digest(known);
        let p = Principal::configured(&digest, Via::Session);
        (p.key_id == session.key_id).then_some(p)
    });
    Ok(still_given)
}

/// Writes the key's "last used", at most once a minute, off the request's path.
fn touch(state: &AppState, key: &KeyRecord) {
    let now = now_us();
    let due = key
        .last_used_us
        .is_none_or(|last| now.saturating_sub(last) >= TOUCH_EVERY_US);
    if !due {
        return;
    }
    let (store, id) = (state.store.clone(), key.id.clone());
    tokio::spawn(async move {
        if let Err(e) = store.access().touch_key(&id, now).await {
            tracing::debug!(error = %crate::failure::chain(&e), "a key's last use was not recorded");
        }
    });
}

/// The credentials of an `Authorization: Bearer <key>` header; the scheme's case
/// does not matter (RFC 9110).
fn bearer(header: &str) -> Option<&str> {
    let (scheme, key) = header.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| key.trim())
        .filter(|k| !k.is_empty())
}

/// The caller, from the request's extensions when a door already knows it (a page
/// rendering calls the API in-process with its own caller), else from its
/// credentials. `None` when auth is on and there are none.
async fn caller(state: &AppState, request: &mut Request) -> ApiResult<Option<Principal>> {
    if let Some(known) = request.extensions().get::<Principal>() {
        return Ok(Some(known.clone()));
    }
    // Credentials that name a caller are read first: a key or session that works
    // means auth is on, so whether any key is stored need not be asked as well
    // (under write load on PostgreSQL, each lookup waits its turn for a core).
    // Only the headers cross the await: a request's body is not Sync.
    let named = if has_credentials(state, request.headers()) {
        Some(identify(state, request.headers()).await)
    } else {
        None
    };
    if let Some(Ok(Some(principal))) = named {
        note_auth(state, true);
        return Ok(Some(principal));
    }
    if !request_auth_on(state, request).await? {
        return Ok(Some(Principal::open()));
    }
    named.unwrap_or(Ok(None))
}

/// Whether the request carries an `Authorization` header or a session cookie.
fn has_credentials(state: &AppState, headers: &HeaderMap) -> bool {
    headers.contains_key(header::AUTHORIZATION)
        || secret::session_token(headers, secure(state, headers)).is_some()
}

/// The door of the API and of OTLP: with auth on, every request needs credentials
/// (401), and one that changes anything needs a write scope (403) and, when it rides
/// on a session cookie, must come from this site (403 `cross_site_request`).
pub async fn api_door(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> ApiResult<Response> {
    let principal = caller(&state, &mut request).await?.ok_or_else(|| {
        ApiError::Unauthorized(
            "this server needs credentials: send Authorization: Bearer <key>, or sign in at /login"
                .into(),
        )
    })?;
    if !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        if !principal.scope.writes() {
            return Err(ApiError::forbidden(
                "forbidden",
                "this key may only read; writing needs a write key",
            ));
        }
        if principal.via == Via::Session && !secret::same_site(request.headers()) {
            return Err(ApiError::forbidden(
                "cross_site_request",
                "a change made with a session cookie must come from this site",
            ));
        }
    }
    request.extensions_mut().insert(principal);
    Ok(next.run(request).await)
}

/// The sign-in page, which the pages' door sends a signed-out browser to.
pub const LOGIN: &str = "/login";

/// The sign-in page's path for a browser that asked for `asked`.
pub fn login_path(asked: &str) -> String {
    format!("{LOGIN}?next={}", treeline_wire::routes::encode(asked))
}

/// What the pages' door needs: the state, and the site's own files (`public/`, at the
/// site root), which stay open because the sign-in page uses them.
#[derive(Clone)]
pub struct PageDoor {
    pub state: AppState,
    pub open_files: Arc<HashSet<String>>,
}

impl PageDoor {
    /// `open_files`: the site's top files as paths (`/favicon.svg`).
    pub fn new(state: AppState, open_files: Vec<String>) -> Self {
        PageDoor {
            state,
            open_files: Arc::new(open_files.into_iter().collect()),
        }
    }
}

/// The door of everything the pages' router answers, its fallback included (a
/// trailing slash, an unknown path): a signed-out browser is sent to sign in, and
/// back to the very URL it asked for afterwards.
pub async fn page_door(State(door): State<PageDoor>, mut request: Request, next: Next) -> Response {
    if door.open_files.contains(request.uri().path()) {
        return next.run(request).await;
    }
    match caller(&door.state, &mut request).await {
        Ok(Some(principal)) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Ok(None) => {
            let asked = request.uri().path_and_query().map_or("/", |pq| pq.as_str());
            Redirect::to(&login_path(asked)).into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// 404 `run_not_found` unless the caller sees the run's project: to a project key,
/// another project's run is exactly as absent as one that never was.
pub async fn visible_run(state: &AppState, principal: &Principal, run_id: &str) -> ApiResult<()> {
    if principal.project.is_none() {
        return Ok(());
    }
    seen_run(state, principal, run_id).await
}

/// 404 `run_not_found` unless the run exists and `principal` sees its project: one
/// key lookup.
pub async fn seen_run(state: &AppState, principal: &Principal, run_id: &str) -> ApiResult<()> {
    match state.store.reads().run_project(run_id).await? {
        Some(project) if principal.sees(&project) => Ok(()),
        _ => Err(ApiError::run_not_found(run_id)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_is_case_insensitive_and_the_key_must_be_there() {
        assert_eq!(bearer("Bearer k1"), Some("k1"));
        assert_eq!(bearer("bearer k1"), Some("k1"));
        assert_eq!(bearer("BEARER   k1 "), Some("k1"));
        assert_eq!(bearer("Basic k1"), None);
        assert_eq!(bearer("Bearer "), None);
    }

    #[test]
    fn scopes_and_projects() {
        assert!(!Scope::Read.writes());
        assert!(Scope::Write.writes() && Scope::Admin.writes());
        assert_eq!(Scope::parse("admin"), Some(Scope::Admin));
        assert_eq!(Scope::parse("Admin"), None);
        let mut p = Principal::open();
        assert!(p.sees("a"));
        p.project = Some("a".into());
        assert!(p.sees("a") && !p.sees("b"));
    }
}
