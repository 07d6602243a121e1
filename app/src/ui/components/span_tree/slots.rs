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
