//! Stored API keys and browser sessions, the same on both databases. Keys and
//! session tokens are kept only as SHA-256 digests (hex): a stolen database file
//! signs nobody in.

use async_trait::async_trait;
use sqlx::Pool;

use super::dialect::{Dialect, Sql};
use super::rows::DbRow;
use super::StoreResult;

/// A stored key, without its secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRecord {
    pub id: String,
    pub name: String,
    /// `read`, `write` or `admin`.
    pub scope: String,
    /// The one project the key sees; `None` for every project.
    pub project: Option<String>,
    pub created_us: i64,
    pub last_used_us: Option<i64>,
    /// When the key was revoked: it no longer works, and is kept to say who had access.
    pub revoked_us: Option<i64>,
}

/// What a session cookie stands for: the key it was opened with, and that key's
/// record (`None` when the key is not a stored one, or is gone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    pub key_id: String,
    pub key: Option<KeyRecord>,
}

/// Keys and sessions. Every lookup reads committed data, so a revocation is seen by
/// the next request.
#[async_trait]
pub trait Access: Send + Sync {
    /// Whether any key that is not revoked is stored (then the server asks for
    /// credentials).
    async fn any_key(&self) -> StoreResult<bool>;
    /// Stores `key` under the digest of its secret.
    async fn create_key(&self, key: &KeyRecord, digest: &str) -> StoreResult<()>;
    /// Every stored key, revoked ones included, oldest first.
    async fn list_keys(&self) -> StoreResult<Vec<KeyRecord>>;
    /// Marks the key revoked at `now` and deletes every session opened with it; false
    /// when there is no such key, or it was revoked already.
    async fn revoke_key(&self, id: &str, now: i64) -> StoreResult<bool>;
    /// The key whose secret has `digest`, unless it was revoked.
    async fn key_by_digest(&self, digest: &str) -> StoreResult<Option<KeyRecord>>;
    /// Notes that the key was used at `now`.
    async fn touch_key(&self, id: &str, now: i64) -> StoreResult<()>;
    async fn create_session(
        &self,
        digest: &str,
        key_id: &str,
        now: i64,
        expires_us: i64,
    ) -> StoreResult<()>;
    /// The session whose token has `digest`, unless it has expired at `now`.
    async fn session(&self, digest: &str, now: i64) -> StoreResult<Option<SessionRecord>>;
    async fn end_session(&self, digest: &str) -> StoreResult<()>;
    /// Forgets sessions expired before `now`; answers how many.
    async fn prune_sessions(&self, now: i64) -> StoreResult<u64>;
}

/// [`Access`] over a database: lookups on the read pool, changes on the write pool.
pub struct AccessStore<DB: Dialect> {
    read: Pool<DB>,
    write: Pool<DB>,
}

const KEY_COLUMNS: &str = "id, name, scope, project, created_us, last_used_us, revoked_us";

impl<DB: Dialect> AccessStore<DB> {
    pub fn new(read: Pool<DB>, write: Pool<DB>) -> Self {
        AccessStore { read, write }
    }

    async fn change(&self, q: Sql<'_, DB>) -> StoreResult<u64> {
        Ok(DB::execute(&mut *self.write.acquire().await?, q).await?)
    }

    async fn keys(&self, q: Sql<'_, DB>) -> StoreResult<Vec<KeyRecord>> {
        DB::fetch_all(&self.read, q)
            .await?
            .iter()
            .map(key)
            .collect()
    }
}

fn key(r: &impl DbRow) -> StoreResult<KeyRecord> {
    Ok(KeyRecord {
        id: r.req_text("id")?,
        name: r.req_text("name")?,
        scope: r.req_text("scope")?,
        project: r.text("project")?,
        created_us: r.req_int("created_us")?,
        last_used_us: r.int("last_used_us")?,
        revoked_us: r.int("revoked_us")?,
    })
}

#[async_trait]
impl<DB: Dialect> Access for AccessStore<DB> {
    async fn any_key(&self) -> StoreResult<bool> {
        let rows = DB::fetch_all(
            &self.read,
            Sql::new("SELECT 1 AS one FROM api_keys WHERE revoked_us IS NULL LIMIT 1"),
        )
        .await?;
        Ok(!rows.is_empty())
    }

    async fn create_key(&self, k: &KeyRecord, digest: &str) -> StoreResult<()> {
        let mut q = Sql::<DB>::new(
            "INSERT INTO api_keys (id, name, scope, project, digest, created_us) VALUES (",
        );
        q.bind(&k.id)
            .push(", ")
            .bind(&k.name)
            .push(", ")
            .bind(&k.scope);
        q.push(", ").bind(&k.project).push(", ").bind(digest);
        q.push(", ").bind(k.created_us).push(")");
        self.change(q).await.map(drop)
    }

    async fn list_keys(&self) -> StoreResult<Vec<KeyRecord>> {
        self.keys(Sql::new(format!(
            "SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_us, id"
        )))
        .await
    }

    async fn revoke_key(&self, id: &str, now: i64) -> StoreResult<bool> {
        let mut tx = self.write.begin().await?;
        let mut q = Sql::<DB>::new("DELETE FROM sessions WHERE key_id = ");
        q.bind(id);
        DB::execute(&mut *tx, q).await?;
        let mut q = Sql::<DB>::new("UPDATE api_keys SET revoked_us = ");
        q.bind(now)
            .push(" WHERE revoked_us IS NULL AND id = ")
            .bind(id);
        let revoked = DB::execute(&mut *tx, q).await?;
        tx.commit().await?;
        Ok(revoked > 0)
    }

    async fn key_by_digest(&self, digest: &str) -> StoreResult<Option<KeyRecord>> {
        let mut q = Sql::<DB>::new(format!(
            "SELECT {KEY_COLUMNS} FROM api_keys WHERE digest = "
        ));
        q.bind(digest).push(" AND revoked_us IS NULL");
        Ok(self.keys(q).await?.into_iter().next())
    }

    async fn touch_key(&self, id: &str, now: i64) -> StoreResult<()> {
        let mut q = Sql::<DB>::new("UPDATE api_keys SET last_used_us = ");
        q.bind(now).push(" WHERE id = ").bind(id);
        self.change(q).await.map(drop)
    }

    async fn create_session(
        &self,
        digest: &str,
        key_id: &str,
        now: i64,
        expires_us: i64,
    ) -> StoreResult<()> {
        let mut q = Sql::<DB>::new(
            "INSERT INTO sessions (digest, key_id, created_us, expires_us) VALUES (",
        );
        q.bind(digest).push(", ").bind(key_id).push(", ").bind(now);
        q.push(", ").bind(expires_us).push(")");
        self.change(q).await.map(drop)
    }

    async fn session(&self, digest: &str, now: i64) -> StoreResult<Option<SessionRecord>> {
        let mut q = Sql::<DB>::new(
            "SELECT s.key_id, k.id, k.name, k.scope, k.project, k.created_us, k.last_used_us,
                    k.revoked_us
               FROM sessions s LEFT JOIN api_keys k ON k.id = s.key_id AND k.revoked_us IS NULL
              WHERE s.digest = ",
        );
        q.bind(digest).push(" AND s.expires_us > ").bind(now);
        let rows = DB::fetch_all(&self.read, q).await?;
        let Some(r) = rows.first() else {
            return Ok(None);
        };
        let key = match r.text("id")? {
            Some(_) => Some(key(r)?),
            None => None,
        };
        Ok(Some(SessionRecord {
            key_id: r.req_text("key_id")?,
            key,
        }))
    }

    async fn end_session(&self, digest: &str) -> StoreResult<()> {
        let mut q = Sql::<DB>::new("DELETE FROM sessions WHERE digest = ");
        q.bind(digest);
        self.change(q).await.map(drop)
    }

    async fn prune_sessions(&self, now: i64) -> StoreResult<u64> {
        let mut q = Sql::<DB>::new("DELETE FROM sessions WHERE expires_us <= ");
        q.bind(now);
        self.change(q).await
    }
}
