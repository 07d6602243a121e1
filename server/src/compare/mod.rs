//! Comparing spans: their children aligned level by level, and two spans' bodies
//! diffed.

mod align;
mod diff;

pub use align::{add_body_differences, align, Aligned};
pub use diff::diff_spans;
