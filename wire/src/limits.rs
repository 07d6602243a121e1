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
