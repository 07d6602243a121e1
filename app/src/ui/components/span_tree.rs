//! The span tree: roots on select, children fetched on expand, "load more" past a
//! read, and only the rows in view rendered, so a node of 10,000 children scrolls as
//! easily as one of ten. It follows the WAI-ARIA tree pattern.

mod keys;
mod live;
mod load;
mod model;
mod rows;
mod view;
mod viewport;
mod window;

pub(crate) use load::load_seed;
pub(crate) use view::SpanTree;
