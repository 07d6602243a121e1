//! Who the caller of the API is.

use serde::{Deserialize, Serialize};

/// The answer of `GET /api/session`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// Whether this server asks for credentials.
    pub auth: bool,
    /// Whether the caller came with a session cookie (and so can sign out).
    pub signed_in: bool,
    /// The key's name; `None` when auth is off.
    pub name: Option<String>,
    /// `read`, `write` or `admin`; `None` when auth is off.
    pub scope: Option<String>,
    /// The one project the caller sees; `None` for every project.
    pub project: Option<String>,
    /// The id of the caller's key (of the key a session signed in with): the author
    /// of its annotations. `None` when auth is off.
    #[serde(default)]
    pub key_id: Option<String>,
    /// How far behind its primary the replica that query routes read is, in
    /// milliseconds; `None` when they read the primary.
    #[serde(default)]
    pub replica_lag_ms: Option<i64>,
}
