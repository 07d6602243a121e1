//! The numeric limits of the contract, in one place so that the server enforces and
//! the clients respect the same figures.

/// Items (events or metric points) in one write batch.
pub const MAX_BATCH_ITEMS: usize = 10_000;
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
