//! Secrets and the headers that carry them: new keys and session tokens, their
//! digests, the session cookie, and whether a browser request comes from this site.

use axum::http::{header, HeaderMap, HeaderValue};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest, Sha256};

/// The session cookie's name over plain http.
pub const COOKIE: &str = "treeline_session";
/// Its name when it is `Secure`: browsers take a `__Host-` cookie only from a secure
/// page, for the whole host, so a neighbouring subdomain cannot plant one.
pub const SECURE_COOKIE: &str = "__Host-treeline_session";

/// The cookie name a request reads and sets: the `__Host-` one when the session
/// cookie is `Secure` for it.
pub fn cookie_name(secure: bool) -> &'static str {
    if secure {
        SECURE_COOKIE
    } else {
        COOKIE
    }
}
/// What every new API key starts with, so a leaked one is easy to spot in a log or
/// a secret scanner.
pub const KEY_PREFIX: &str = "tl_";

/// `bytes` random bytes, base64url. Fails only when the operating system cannot
/// give randomness, which no request can cause.
pub fn random(bytes: usize) -> Result<String, getrandom::Error> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf)?;
    Ok(URL_SAFE_NO_PAD.encode(buf))
}

/// A new API key: 256 random bits.
pub fn new_key() -> Result<String, getrandom::Error> {
    Ok(format!("{KEY_PREFIX}{}", random(32)?))
}

/// A new key id: short, public, and unlike any key.
pub fn new_key_id() -> Result<String, getrandom::Error> {
    let mut buf = [0u8; 6];
    getrandom::fill(&mut buf)?;
    Ok(format!(
        "key_{}",
        buf.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

/// The SHA-256 digest of a secret, in hex: what the database keeps.
pub fn digest(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Compares two digests without returning early.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The session token of the request's cookie, if any: the cookie named for a
/// secure request or a plain one, never the other.
pub fn session_token(headers: &HeaderMap, secure: bool) -> Option<&str> {
    let name = cookie_name(secure);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(found, _)| *found == name)
        .map(|(_, value)| value.trim())
        .filter(|v| !v.is_empty())
}

/// The `Set-Cookie` value that keeps `token` for `max_age_s` seconds (0 clears it).
/// HttpOnly, so no script reads it; SameSite=Lax, so another site's form or fetch
/// does not carry it; Secure when the dashboard is reached over https.
pub fn cookie(token: &str, max_age_s: i64, secure: bool) -> HeaderValue {
    let name = cookie_name(secure);
    let secure = if secure { "; Secure" } else { "" };
    let text =
        format!("{name}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_s}{secure}");
    // The token is base64url and the rest is ours: always a valid header value.
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Whether the browser reached us over https, as a TLS proxy says in
/// `X-Forwarded-Proto`.
pub fn forwarded_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

/// Whether a browser request comes from a page of this same site: its `Origin`
/// names the host it was sent to or, without an Origin, `Sec-Fetch-Site` says so.
/// A request with neither is refused: every current browser sends one of them.
pub fn same_site(headers: &HeaderMap) -> bool {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(origin) = text(header::ORIGIN.as_str()) {
        let authority = origin
            .strip_prefix("https://")
            .or_else(|| origin.strip_prefix("http://"));
        return match (authority, text(header::HOST.as_str())) {
            (Some(authority), Some(host)) => authority.eq_ignore_ascii_case(host),
            _ => false,
        };
    }
    matches!(text("sec-fetch-site"), Some("same-origin" | "none"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn same_site_needs_a_matching_origin_or_fetch_site() {
        let host = ("host", "dash.example:3000");
        assert!(same_site(&headers(&[
            host,
            ("origin", "http://dash.example:3000")
        ])));
        assert!(same_site(&headers(&[
            host,
            ("origin", "https://DASH.example:3000")
        ])));
        assert!(!same_site(&headers(&[
            host,
            ("origin", "http://evil.example")
        ])));
        assert!(!same_site(&headers(&[host, ("origin", "null")])));
        assert!(!same_site(&headers(&[
            host,
            ("origin", "http://dash.example:3001")
        ])));
        assert!(same_site(&headers(&[
            host,
            ("sec-fetch-site", "same-origin")
        ])));
        assert!(!same_site(&headers(&[
            host,
            ("sec-fetch-site", "cross-site")
        ])));
        assert!(!same_site(&headers(&[
            host,
            ("sec-fetch-site", "same-site")
        ])));
        assert!(!same_site(&headers(&[host])));
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let h = headers(&[("cookie", "a=1; treeline_session=tok; b=2")]);
        assert_eq!(session_token(&h, false), Some("tok"));
        assert_eq!(
            session_token(&h, true),
            None,
            "a secure request reads __Host- only"
        );
        let h = headers(&[("cookie", "a=1"), ("cookie", "treeline_session=t2")]);
        assert_eq!(session_token(&h, false), Some("t2"));
        let h = headers(&[("cookie", "treeline_session=p; __Host-treeline_session=s")]);
        assert_eq!(session_token(&h, true), Some("s"));
        assert_eq!(session_token(&h, false), Some("p"));
        let set = cookie("tok", 60, true);
        assert!(set
            .to_str()
            .is_ok_and(|v| v.starts_with("__Host-treeline_session=tok; Path=/;")
                && v.ends_with("; Secure")));
        assert_eq!(
            session_token(&headers(&[("cookie", "treeline_session=")]), false),
            None
        );
        assert_eq!(
            session_token(&headers(&[("cookie", "xtreeline_session=a")]), false),
            None
        );
    }

    #[test]
    fn digests_compare_whole() {
        assert!(same(&digest("secret"), &digest("secret")));
        assert!(!same(&digest("secret"), &digest("secre")));
        assert!(!same("ab", "abc"));
        let key = new_key().expect("randomness");
        assert!(key.starts_with(KEY_PREFIX) && key.len() == KEY_PREFIX.len() + 43);
        assert_ne!(key, new_key().expect("randomness"));
        let c = cookie("tok", 60, true);
        let c = c.to_str().expect("ascii");
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Lax") && c.ends_with("Secure"));
    }
}
