//! Browser sign-in: back to the page asked for, signing out, and sessions of keys no
//! longer given.

use crate::common;
use crate::team::{cookie_of, team, Team, BOOT, HOST, ORIGIN};

use std::sync::Arc;

use axum::body::Body;
use axum::http::StatusCode;
use treeline_server::http::AppState;
use treeline_server::site::Site;

#[tokio::test]
async fn signing_in_returns_to_the_page_asked_for_and_signing_out_ends_it() {
    let app = team(common::sqlite().await, &[BOOT]);
    let deep = "/traces?run_id=r1&trace_id=t1&span_id=s1";
    let visit = app.call("GET", deep, &[], Body::empty()).await;
    assert_eq!(visit.status, StatusCode::SEE_OTHER);
    let login = visit.location().to_string();
    let page = app.call("GET", &login, &[], Body::empty()).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body
            .contains(r#"name="next" value="/traces?run_id=r1&amp;trace_id=t1&amp;span_id=s1""#),
        "{}",
        page.body
    );

    let wrong = app.sign_in("not-a-key", deep).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(wrong.headers.get("set-cookie").is_none());
    assert!(wrong.body.contains("not valid"));

    let signed = app.sign_in(BOOT, deep).await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER);
    assert_eq!(signed.location(), deep);
    let set = signed.headers["set-cookie"].to_str().expect("ascii");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Lax") && set.contains("Max-Age="),
        "{set}"
    );
    assert!(!set.contains("Secure"), "plain http: {set}");
    let cookie = cookie_of(&signed);
    let me = app
        .call("GET", "/api/session", &[("cookie", &cookie)], Body::empty())
        .await
        .json();
    assert_eq!(me["signed_in"], true);
    assert_eq!(me["scope"], "admin");
    // Signed in, the sign-in page goes straight on.
    let again = app
        .call("GET", &login, &[("cookie", &cookie)], Body::empty())
        .await;
    assert_eq!(
        (again.status, again.location()),
        (StatusCode::SEE_OTHER, deep)
    );

    // No open redirect.
    let elsewhere = app.sign_in(BOOT, "https://evil.example/").await;
    assert_eq!(elsewhere.location(), "/");
    let elsewhere = app.sign_in(BOOT, "//evil.example/").await;
    assert_eq!(elsewhere.location(), "/");

    // Behind a TLS proxy the cookie is Secure.
    let proxied = app
        .sign_in_with(BOOT, "/", &[("x-forwarded-proto", "https")])
        .await;
    assert!(proxied.headers["set-cookie"]
        .to_str()
        .expect("ascii")
        .contains("Secure"));

    // Signing out from another site is refused; from this one it ends the session.
    let forged = app
        .call(
            "POST",
            "/logout",
            &[("cookie", &cookie), ("origin", "http://evil.example")],
            Body::empty(),
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert_eq!(forged.code(), "cross_site_request");
    let out = app
        .call(
            "POST",
            "/logout",
            &[("cookie", &cookie), ("origin", ORIGIN)],
            Body::empty(),
        )
        .await;
    assert_eq!(
        (out.status, out.location()),
        (StatusCode::SEE_OTHER, "/login")
    );
    assert!(out.headers["set-cookie"]
        .to_str()
        .expect("ascii")
        .contains("Max-Age=0"));
    let after = app
        .call("GET", "/", &[("cookie", &cookie)], Body::empty())
        .await;
    assert_eq!(after.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn a_session_of_a_key_no_longer_given_is_signed_out_everywhere() {
    let first = team(common::sqlite().await, &[BOOT]);
    let cookie = cookie_of(&first.sign_in(BOOT, "/").await);
    // The same database, served again with another key.
    let mut state = AppState::new(first.t.store.clone());
    state.api_keys = Arc::new(vec!["another-key".to_string()]);
    let again = Team {
        app: treeline_server::serve::app(
            state,
            &Site::Dir(std::env::temp_dir()),
            HOST.parse().expect("address"),
        ),
        t: first.t,
    };
    let with_cookie = [("cookie", cookie.as_str())];
    let page = again
        .call("GET", "/traces", &with_cookie, Body::empty())
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    // The sign-in page agrees, rather than sending the browser back to the page.
    let login = again
        .call("GET", page.location(), &with_cookie, Body::empty())
        .await;
    assert_eq!(login.status, StatusCode::OK, "{}", login.location());
    assert!(login.body.contains("<form"));
}
