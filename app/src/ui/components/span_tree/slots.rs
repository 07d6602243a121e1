//! What each kept row element shows: a signal an element, set only when the row
//! that falls to it changes. Derived as a memo each from the drawn slice instead,
//! every scroll marked, checked and reran all the elements' reactive nodes (about
//! 25 a row), though only the rows that came into view had changed (a profile of
//! the million-span trace's scroll: most of the wasm's time a frame).

use std::ops::Range;

use leptos::prelude::*;
use treeline_wire::SpanNode;

use super::model::{Drawn, Row, Tree};
use super::window;

#[derive(Clone, Copy)]
pub(super) struct Slots {
    items: StoredValue<Vec<RwSignal<Option<Drawn>>>>,
    /// The view's owner, which the signals belong to: made while a scroll is being
    /// drawn, they would otherwise go with that effect's next run.
    owner: StoredValue<Owner>,
}

impl Slots {
    pub(super) fn new() -> Self {
        Slots {
            items: StoredValue::new(Vec::new()),
            owner: StoredValue::new(Owner::current().unwrap_or_default()),
        }
    }

    /// Element `slot`'s signal, made showing `shown()` if it is new.
    pub(super) fn item(
        self,
        slot: usize,
        shown: impl Fn() -> Option<Drawn>,
    ) -> RwSignal<Option<Drawn>> {
        let owner = self.owner.get_value();
        self.items.update_value(|items| {
            while items.len() <= slot {
                let initial = if items.len() == slot { shown() } else { None };
                items.push(owner.with(|| RwSignal::new(initial)));
            }
        });
        self.items.with_value(|items| items[slot])
    }

    /// Sets each element whose row changed to the row that falls to it in `range`.
    pub(super) fn update(self, tree: &Tree, rows: &[Row], range: Range<usize>, slots: usize) {
        let items = self.items.get_value();
        for (slot, item) in items.into_iter().enumerate().take(slots) {
            let want = shown_by(tree, rows, range.clone(), slots, slot);
            let same = item.with_untracked(|shown| match (shown, &want) {
                (None, None) => true,
                (Some((i, row, node)), Some((j, want_row, want_node))) => {
                    i == j && row == *want_row && node.as_ref() == *want_node
                }
                _ => false,
            });
            if !same {
                item.set(want.map(|(i, row, node)| (i, row.clone(), node.cloned())));
            }
        }
    }
}

/// The row element `slot` of `slots` shows for `range` of `rows`, borrowed.
pub(super) fn shown_by<'a>(
    tree: &'a Tree,
    rows: &'a [Row],
    range: Range<usize>,
    slots: usize,
    slot: usize,
) -> Option<(usize, &'a Row, Option<&'a SpanNode>)> {
    let i = range.start + window::slot_of(slot, slots, range.start);
    if i >= range.end {
        return None;
    }
    tree.row_at(rows, i).map(|(row, node)| (i, row, node))
}

#[cfg(test)]
mod tests {
    use super::super::model::test_node;
    use super::*;

    #[test]
    fn a_scroll_moves_only_the_rows_that_came_into_view_to_other_elements() {
        let owner = Owner::new_root(None);
        owner.set();
        let mut tree = Tree::default();
        let spans = (0..100).map(|i| test_node(&format!("s{i}"), 0)).collect();
        tree.add_page("", spans, None);
        let rows = tree.rows();
        let (slots, n) = (Slots::new(), 10);
        let shown = |range: Range<usize>, slot| {
            shown_by(&tree, &rows, range, n, slot)
                .map(|(i, row, node)| (i, row.clone(), node.cloned()))
        };
        let items: Vec<_> = (0..n).map(|s| slots.item(s, || shown(0..10, s))).collect();
        let read = || -> Vec<Option<usize>> {
            items
                .iter()
                .map(|item| item.with_untracked(|d| d.as_ref().map(|d| d.0)))
                .collect()
        };
        let before = read();
        assert_eq!(before, (0..10).map(Some).collect::<Vec<_>>());

        // Three rows on: the three that came in take the elements of the three that
        // left, and the other seven elements keep the rows they showed.
        slots.update(&tree, &rows, 3..13, n);
        let after = read();
        let moved = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        assert_eq!(moved, 3);
        assert_eq!(&after[..3], [Some(10), Some(11), Some(12)]);
        assert_eq!(&after[3..], &before[3..]);

        // Near the end, the elements past the last row show nothing.
        slots.update(&tree, &rows, 95..100, n);
        let end = read();
        assert_eq!(end.iter().flatten().count(), 5);
        assert!(end.iter().flatten().all(|&i| (95..100).contains(&i)));
        let span = items[5].with_untracked(|d| d.as_ref().and_then(|d| d.2.clone()));
        assert_eq!(span.map(|s| s.span_id), Some("s95".to_string()));
    }
}
