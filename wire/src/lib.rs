//! Treeline's HTTP contract (docs/api.md): the wire types, their validation and
//! vocabularies, the limits and the route paths. The server, the browser code and
//! the Rust client all take them from here, so every side parses and prints the same
//! shapes, and no client links the UI.

pub mod annotations;
pub mod changes;
pub mod filter;
pub mod groups;
pub mod limits;
pub mod query;
pub mod retention;
pub mod routes;
pub mod run_compare;
pub mod run_list;
pub mod stats;
pub mod text;

mod compare;
pub mod contract;
mod dates;
mod drafts;
mod events;
mod export;
mod ids;
mod kinds;
mod metrics;
mod read;
mod runs;
mod session;

pub use compare::*;
pub use dates::{civil_date, days_from_civil};
pub use drafts::*;
pub use events::*;
pub use export::*;
pub use ids::*;
pub use kinds::*;
pub use metrics::*;
pub use read::*;
pub use runs::*;
pub use session::*;

use serde::{Deserialize, Serialize};

/// The JSON error shape every failing endpoint answers with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}

/// A field that failed validation: the code clients branch on and a sentence that
/// names the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Invalid {
    pub code: &'static str,
    pub message: String,
}

impl Invalid {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}
