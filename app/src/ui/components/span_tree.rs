//! The span tree: roots on select, children fetched on expand, the next page read
//! as the reader scrolls toward it ("load more" stays, for a page that failed), and
//! only the rows in view rendered, so a node of 100,000 children scrolls as easily
//! as one of ten. It follows the WAI-ARIA tree pattern.

mod keys;
mod live;
mod load;
mod model;
mod node_row;
mod rows;
mod slots;
mod view;
mod viewport;
mod window;

pub(crate) use load::load_seed;
pub(crate) use view::SpanTree;
