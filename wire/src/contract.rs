//! The contract's vocabularies and limits as one JSON document, `wire/contract.json`,
//! so that a client in another language (the Python SDK's tests) checks its own
//! copies against the crate's rather than by count. A test here keeps the file equal
//! to the crate; `TREELINE_WRITE_CONTRACT=1 cargo test -p treeline-wire contract`
//! writes it anew.

use serde_json::{json, Value};

use crate::limits::{MAX_BATCH_ITEMS, MAX_METRIC_NAME_BYTES, MAX_SPAN_METRICS};
use crate::{
    RunStatus, SpanKind, SpanStatus, MAX_ATTRIBUTES, MAX_ATTRIBUTE_BYTES, MAX_ATTRIBUTE_NAME_BYTES,
    MAX_NAME_CHARS, RESERVED_ATTRIBUTES,
};

/// The vocabularies and the limits a client checks before it sends.
pub fn contract() -> Value {
    json!({
        "span_kinds": SpanKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        "close_statuses": SpanStatus::ALL
            .iter()
            .filter(|s| **s != SpanStatus::Running)
            .map(|s| s.as_str())
            .collect::<Vec<_>>(),
        "finish_statuses": RunStatus::ALL
            .iter()
            .filter(|s| **s != RunStatus::Running)
            .map(|s| s.as_str())
            .collect::<Vec<_>>(),
        "reserved_attributes": RESERVED_ATTRIBUTES,
        "max_attributes": MAX_ATTRIBUTES,
        "max_attribute_bytes": MAX_ATTRIBUTE_BYTES,
        "max_attribute_name_bytes": MAX_ATTRIBUTE_NAME_BYTES,
        "max_span_name_chars": MAX_NAME_CHARS,
        "max_batch_items": MAX_BATCH_ITEMS,
        "max_span_metrics": MAX_SPAN_METRICS,
        "max_metric_name_bytes": MAX_METRIC_NAME_BYTES,
    })
}

#[cfg(test)]
mod tests {
    const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/contract.json");

    #[test]
    fn the_contract_file_is_the_crates_own() {
        let text = format!(
            "{}\n",
            serde_json::to_string_pretty(&super::contract()).unwrap_or_default()
        );
        if std::env::var_os("TREELINE_WRITE_CONTRACT").is_some() {
            std::fs::write(FILE, &text).unwrap_or_else(|e| panic!("{FILE}: {e}"));
        }
        let kept = std::fs::read_to_string(FILE).unwrap_or_default();
        assert_eq!(
            kept, text,
            "wire/contract.json differs from the crate: write it anew with \
             TREELINE_WRITE_CONTRACT=1 cargo test -p treeline-wire contract"
        );
    }
}
