//! The numeric limits of the contract, in one place so that the server enforces and
//! the clients respect the same figures.

/// Items (events or metric points) in one write batch.
pub const MAX_BATCH_ITEMS: usize = 10_000;
/// Spans in one OTLP export request (OpenTelemetry SDKs send 512 at a time by
/// default, the Collector's batch processor 8,192).
pub const MAX_OTLP_SPANS: usize = 10_000;
/// Whitespace-separated terms in a trace search (`q`).
pub const MAX_SEARCH_TERMS: usize = 8;
/// Runs per page: the default and the most a `limit` may ask for.
pub const RUNS_PAGE: usize = 50;
pub const RUNS_PAGE_MAX: usize = 500;
/// Traces per page.
pub const TRACES_PAGE: usize = 50;
pub const TRACES_PAGE_MAX: usize = 500;
/// Children per span page.
pub const SPAN_PAGE: usize = 200;
pub const SPAN_PAGE_MAX: usize = 1_000;
/// The longest `name` a span page may filter children by (characters).
pub const MAX_CHILD_NAME_FILTER: usize = 200;
/// Points per metric series after downsampling: the default and the bounds.
pub const METRIC_POINTS: usize = 2_000;
pub const METRIC_POINTS_MIN: usize = 2;
pub const METRIC_POINTS_MAX: usize = 100_000;
/// Keys in a span's `metrics` map, and the longest key (bytes).
pub const MAX_SPAN_METRICS: usize = 256;
pub const MAX_METRIC_NAME_BYTES: usize = 256;
/// A run's `config`, as JSON text (bytes).
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;
/// The latest timestamp accepted, in microseconds since 1970 (the year 3000): any
/// difference of two accepted timestamps fits an i64 with room to spare.
pub const MAX_TIMESTAMP_US: i64 = 32_503_680_000_000_000;

/// A timestamp the server accepts: not before 1970, not after [`MAX_TIMESTAMP_US`].
/// The error names `field`.
pub fn check_timestamp(ts: i64, field: &str) -> Result<(), crate::Invalid> {
    if (0..=MAX_TIMESTAMP_US).contains(&ts) {
        return Ok(());
    }
    Err(crate::Invalid::new(
        "invalid_field",
        format!("{field} must be between 0 and {MAX_TIMESTAMP_US} microseconds since 1970"),
    ))
}

/// Whether `value` holds a NUL character in a string or a key; allocates nothing,
/// as every event and metric point on the ingest path is asked.
fn has_nul(value: &serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(map) => map_has_nul(map),
        _ => false,
    }
}

fn map_has_nul(map: &serde_json::Map<String, serde_json::Value>) -> bool {
    map.iter().any(|(k, v)| k.contains('\0') || has_nul(v))
}

/// Where `value` holds a NUL character (`\u0000`), in a string or a key: its path
/// (`field.key[2]`), under `field`. PostgreSQL can store neither in text or JSONB,
/// so both databases refuse it alike.
pub fn nul_path(value: &serde_json::Value, field: &str) -> Option<String> {
    use serde_json::Value;
    if !has_nul(value) {
        return None;
    }
    match value {
        Value::String(s) => s.contains('\0').then(|| field.to_string()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| nul_path(item, &format!("{field}[{i}]"))),
        Value::Object(map) => map_nul_path(map, field),
        _ => None,
    }
}

/// [`nul_path`] of an object's keys and values.
fn map_nul_path(map: &serde_json::Map<String, serde_json::Value>, field: &str) -> Option<String> {
    if !map_has_nul(map) {
        return None;
    }
    map.iter().find_map(|(key, item)| {
        if key.contains('\0') {
            return Some(format!("{field} (a key)"));
        }
        let path = if field.is_empty() {
            key.clone()
        } else {
            format!("{field}.{key}")
        };
        nul_path(item, &path)
    })
}

/// [`nul_path`] as the error that names the field.
pub fn check_no_nul(value: &serde_json::Value, field: &str) -> Result<(), crate::Invalid> {
    nul_path(value, field).map_or(Ok(()), |path| Err(nul_error(&path)))
}

/// [`check_no_nul`] for a field that is an object held as a map (an event's
/// attributes before they are checked).
pub(crate) fn check_map_no_nul(
    map: &serde_json::Map<String, serde_json::Value>,
    field: &str,
) -> Result<(), crate::Invalid> {
    map_nul_path(map, field).map_or(Ok(()), |path| Err(nul_error(&path)))
}

/// [`check_no_nul`] for a field that is text.
pub(crate) fn check_text_no_nul(text: &str, field: &str) -> Result<(), crate::Invalid> {
    if text.contains('\0') {
        return Err(nul_error(field));
    }
    Ok(())
}

fn nul_error(path: &str) -> crate::Invalid {
    crate::Invalid::new(
        "invalid_string",
        format!(
            "{} contains a NUL character (\\u0000), which cannot be stored",
            if path.is_empty() { "the body" } else { path }
        ),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_nul_is_found_and_named_wherever_it_hides() {
        let event = json!({"op": "open", "attributes": {"tags": ["a", "b\u{0}"]}, "input": "ok"});
        assert_eq!(
            super::nul_path(&event, "").as_deref(),
            Some("attributes.tags[1]")
        );
        let key = json!({"config": {"bad\u{0}key": 1}});
        assert_eq!(super::nul_path(&key, "").as_deref(), Some("config (a key)"));
        assert!(super::nul_path(&json!({"text": "no nul here", "n": 0}), "").is_none());
        let err = crate::parse_event(&event).unwrap_err();
        assert_eq!(err.code, "invalid_string");
        assert!(
            err.message.contains("attributes.tags[1]"),
            "{}",
            err.message
        );
    }
}
