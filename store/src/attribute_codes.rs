//! A span's attributes are stored keyed by a code, not by name: the same dozen names
//! repeat on every span of a kind and were most of a span row's bytes. Each name is
//! kept once in `attribute_names`; reads turn codes back into names in SQL
//! ([`Dialect::named_attributes`]), and filters look a name's code up there.
//! Traces' root attributes keep their names.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use foldhash::HashSet;
use serde_json::{Map, Value};
use sqlx::Pool;
use treeline_wire::SpanEvent;

use super::dialect::{Dialect, Sql};
use super::rows::DbRow;
use super::{merge, statements, StoreError, StoreResult};
use crate::ingest::SpanWrite;

/// Codes kept in memory past this many names are not added: a client inventing a
/// name a span costs a lookup a batch, not the server's memory.
const MAX_KNOWN: usize = 65_536;

/// Names looked up or added in one statement.
const NAME_CHUNK: usize = 500;

/// The codes of names already committed, shared by every write.
#[derive(Default)]
pub(crate) struct Codes {
    known: Mutex<HashMap<String, i64>>,
}

/// The codes of one group's attribute names.
#[derive(Default)]
pub(crate) struct BatchCodes(HashMap<String, i64>);

/// Every attribute name a group's events carry, each once, sorted.
pub(crate) fn names_of(work: &merge::Work) -> Vec<&str> {
    // A set first: thousands of spans carry the same dozen names.
    let distinct: HashSet<&str> = work
        .iter()
        .flat_map(|(_, batch, _)| &batch.events)
        .flat_map(|(_, event)| match event {
            SpanEvent::Open(open) => open.attributes.keys(),
            SpanEvent::Close(close) => close.attributes.keys(),
        })
        .map(String::as_str)
        .collect();
    let mut names: Vec<&str> = distinct.into_iter().collect();
    names.sort_unstable();
    names
}

impl Codes {
    /// The code of each of `names` (sorted, distinct), adding the ones not stored
    /// yet. Its own short statements, committed before the group's transaction
    /// begins: two PostgreSQL groups adding a name then never wait on each other's
    /// other rows, and a code in memory is always one the database holds (a group
    /// that fails afterwards leaves only a name unused).
    pub(crate) async fn resolve<DB: Dialect>(
        &self,
        pool: &Pool<DB>,
        names: &[&str],
    ) -> StoreResult<BatchCodes> {
        let mut batch = BatchCodes::default();
        let mut missing: Vec<&str> = Vec::new();
        {
            let known = self.known.lock().map_err(|_| poisoned())?;
            for &name in names {
                match known.get(name) {
                    Some(&code) => {
                        batch.0.insert(name.to_string(), code);
                    }
                    None => missing.push(name),
                }
            }
        }
        if missing.is_empty() {
            return Ok(batch);
        }
        let mut conn = pool.acquire().await?;
        let mut fresh = Vec::with_capacity(missing.len());
        for chunk in missing.chunks(NAME_CHUNK) {
            let mut q = Sql::<DB>::new("INSERT INTO attribute_names (name) ");
            statements::push_values(&mut q, chunk, |name| [(*name).into()]);
            q.push(" ON CONFLICT (name) DO NOTHING");
            DB::execute(&mut conn, q).await?;
            let mut q = Sql::<DB>::new("SELECT code, name FROM attribute_names WHERE name IN (");
            for (i, name) in chunk.iter().enumerate() {
                if i > 0 {
                    q.push(", ");
                }
                q.bind(*name);
            }
            q.push(")");
            for row in DB::fetch_all_in(&mut conn, q).await? {
                fresh.push((row.req_text("name")?, row.req_int("code")?));
            }
        }
        let mut known = self.known.lock().map_err(|_| poisoned())?;
        for (name, code) in fresh {
            if known.len() < MAX_KNOWN {
                known.insert(name.clone(), code);
            }
            batch.0.insert(name, code);
        }
        Ok(batch)
    }
}

impl BatchCodes {
    /// The code of `name`, when the group has one for it.
    pub(crate) fn code(&self, name: &str) -> Option<i64> {
        self.0.get(name).copied()
    }

    /// The JSON object text of `attributes` keyed by code, as spans store it.
    pub(crate) fn encode(&self, attributes: &Map<String, Value>) -> StoreResult<String> {
        let mut out = String::with_capacity(2 + attributes.len() * 12);
        out.push('{');
        for (i, (name, value)) in attributes.iter().enumerate() {
            let code = self
                .0
                .get(name)
                .ok_or_else(|| StoreError::Corrupt(format!("attribute {name:?} has no code")))?;
            if i > 0 {
                out.push(',');
            }
            // A value's Display is its compact JSON, written in place.
            let _ = write!(out, "\"{code}\":{value}");
        }
        out.push('}');
        Ok(out)
    }

    /// Each span's attributes as [`Self::encode`] writes them, in `spans`' order.
    pub(crate) fn encode_all(&self, spans: &[SpanWrite]) -> StoreResult<Vec<String>> {
        spans.iter().map(|s| self.encode(&s.attributes)).collect()
    }
}

fn poisoned() -> StoreError {
    StoreError::Corrupt("the attribute codes' lock was poisoned".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn attributes_are_written_keyed_by_code_with_values_as_sent() {
        let mut batch = BatchCodes::default();
        batch.0.insert("gen_ai.request.model".into(), 3);
        batch.0.insert("temperature".into(), 12);
        let Value::Object(attributes) = json!({
            "gen_ai.request.model": "gpt \"4\"", "temperature": 0.30000000000000004
        }) else {
            unreachable!("an object literal")
        };
        assert_eq!(
            batch.encode(&attributes).expect("coded"),
            r#"{"3":"gpt \"4\"","12":0.30000000000000004}"#
        );
        assert_eq!(batch.encode(&Map::new()).expect("empty"), "{}");
        let Value::Object(unknown) = json!({"seed": 1}) else {
            unreachable!("an object literal")
        };
        assert!(
            batch.encode(&unknown).is_err(),
            "a name with no code is an error"
        );
    }
}
