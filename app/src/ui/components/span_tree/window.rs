//! Where rows sit. Every row is the same height, so the tree draws only the rows in
//! view (and a margin either side) and knows where any row is without measuring.

use std::ops::Range;

/// A row's height, px.
pub(super) const ROW: f64 = 26.0;
/// Rows drawn beyond each edge of the view, so a fast scroll shows no gap.
const OVERSCAN: usize = 12;
/// Rows past the drawn slice within which a "load more" row reads its page: a
/// page is 200 rows, so the next arrives while about 100 are still to scroll.
pub(super) const READ_AHEAD: usize = 100;
/// Indentation per level, px.
const INDENT: usize = 16;

/// The rows to draw, of `len`, for a view scrolled to `scroll_top` and `height` tall.
pub(super) fn slice(scroll_top: f64, height: f64, len: usize) -> Range<usize> {
    let first = ((scroll_top / ROW) as usize).saturating_sub(OVERSCAN);
    let end = first.saturating_add(slots(height)).min(len);
    first.min(end)..end
}

/// How many rows a view `height` tall draws at most: the row elements kept, each
/// showing whichever row of the slice falls to it (see [`slot_of`]).
pub(super) fn slots(height: f64) -> usize {
    (height / ROW) as usize + 2 * OVERSCAN
}

/// Where in a slice starting at row `first` the row drawn by element `slot` of
/// `slots` is: row `i` falls to element `i % slots`, so a row keeps its element
/// while it stays in the slice, and a scroll only redraws the rows that came in.
pub(super) fn slot_of(slot: usize, slots: usize, first: usize) -> usize {
    let slots = slots.max(1);
    (slot + slots - first % slots) % slots
}

/// The scroll that opens the tree on a deep-linked row: a few rows below the top.
pub(super) fn opening_scroll(row: Option<usize>) -> f64 {
    row.map_or(0.0, |i| (top(i) - 120.0).max(0.0))
}

/// The scroll that brings `row` into view with a row to spare, if it is not in view.
pub(super) fn keep_in_view(row: usize, scroll_top: f64, height: f64) -> Option<f64> {
    let top = top(row);
    if top < scroll_top + ROW {
        Some((top - ROW).max(0.0))
    } else if top + 2.0 * ROW > scroll_top + height {
        Some(top + 2.0 * ROW - height)
    } else {
        None
    }
}

/// A row's inline style: placed at its index, indented by depth past `pad` px.
/// Only what varies: the rest is the stylesheet's (`.tree-scroll [role=treeitem]`),
/// since the style is parsed whole each time a scroll moves the row.
pub(super) fn place(row: usize, depth: usize, pad: usize) -> String {
    format!(
        "top: {}px; padding-left: {}px",
        top(row),
        depth * INDENT + pad
    )
}

fn top(row: usize) -> f64 {
    row as f64 * ROW
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slice_covers_the_view_and_its_margins_within_the_rows() {
        assert_eq!(slice(0.0, 260.0, 10_000), 0..34);
        assert_eq!(slice(ROW * 100.0, 260.0, 10_000), 88..122);
        assert_eq!(slice(ROW * 100.0, 260.0, 95), 88..95);
        assert_eq!(slice(ROW * 100.0, 260.0, 50), 50..50);
        assert_eq!(slice(0.0, 900.0, 0), 0..0);
    }

    #[test]
    fn each_row_of_a_slice_falls_to_one_element_and_keeps_it_while_in_view() {
        let n = slots(260.0);
        assert_eq!(n, 34);
        for first in [0, 5, 33, 34, 1_000] {
            let mut rows: Vec<usize> = (0..n).map(|s| first + slot_of(s, n, first)).collect();
            // Row i is drawn by element i % n.
            assert!((0..n).all(|s| (first + slot_of(s, n, first)) % n == s));
            rows.sort_unstable();
            assert_eq!(rows, (first..first + n).collect::<Vec<_>>());
        }
        // Scrolled by 20 rows, the 14 rows still in view keep their elements.
        let kept = (0..n)
            .filter(|&s| slot_of(s, n, 100) + 100 == slot_of(s, n, 120) + 120)
            .count();
        assert_eq!(kept, 14);
    }

    #[test]
    fn a_row_out_of_view_is_scrolled_in_with_a_row_to_spare() {
        assert_eq!(keep_in_view(10, 0.0, 520.0), None);
        assert_eq!(keep_in_view(0, 0.0, 520.0), Some(0.0));
        assert_eq!(keep_in_view(5, ROW * 10.0, 520.0), Some(ROW * 4.0));
        assert_eq!(keep_in_view(30, 0.0, 520.0), Some(ROW * 32.0 - 520.0));
    }

    #[test]
    fn rows_are_placed_by_index_and_depth() {
        assert_eq!(place(3, 2, 4), "top: 78px; padding-left: 36px");
        assert_eq!(opening_scroll(None), 0.0);
        assert_eq!(opening_scroll(Some(2)), 0.0);
        assert_eq!(opening_scroll(Some(10)), 140.0);
    }
}
