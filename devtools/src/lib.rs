//! `treeline demo` and `treeline bench`: the demo's runs and the load tools. The
//! server they feed and measure is handed in as a [`Host`], so this crate depends
//! on storage and the contract, never on the server, and the binary includes it
//! through its default `devtools` feature.

pub mod bench;
pub mod demo;
pub mod process;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use treeline_store::failure::Outcome;
use treeline_store::Store;

// The paths these modules were written with.
use treeline_store::{self as store, failure};

/// What the benchmarks and the demo need of the server: its routers over a store,
/// and a new stored key.
pub trait Host: Sync {
    /// The API alone (what `/api` serves) over `store`.
    fn api(&self, store: Arc<dyn Store>) -> axum::Router;
    /// The whole server over `store`, as `treeline serve` assembles it, at `addr`.
    fn app(&self, store: Arc<dyn Store>, addr: SocketAddr) -> axum::Router;
    /// A new write key in the clear, and the record and digest to store for it.
    fn new_write_key(&self, name: &str) -> Outcome<NewKey>;
}

/// A key made by [`Host::new_write_key`], not yet stored.
pub struct NewKey {
    pub key: String,
    pub record: store::KeyRecord,
    pub digest: String,
}

/// Now, in microseconds since the Unix epoch (0 on a clock before it).
pub(crate) fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// `1234567` → `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn numbers_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
