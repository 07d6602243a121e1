//! The tree's keyboard (the WAI-ARIA tree pattern) as a pure function: a key and
//! what is on screen in, the one thing to do out. The view carries it out.

use super::model::{Row, Tree};

/// The keys the tree answers, by `KeyboardEvent.key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Key {
    Up,
    Down,
    Home,
    End,
    Left,
    Right,
    Enter,
    Space,
}

impl Key {
    pub(super) fn from_dom(key: &str) -> Option<Key> {
        Some(match key {
            "ArrowUp" => Key::Up,
            "ArrowDown" => Key::Down,
            "Home" => Key::Home,
            "End" => Key::End,
            "ArrowLeft" => Key::Left,
            "ArrowRight" => Key::Right,
            "Enter" => Key::Enter,
            " " => Key::Space,
            _ => return None,
        })
    }
}

/// What a key does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Focus the span `id`, drawn at index `row` of the rows (to scroll it into view).
    Focus {
        id: String,
        row: usize,
    },
    Expand(String),
    Collapse(String),
    Select(String),
    /// A tree key with nothing to do where the focus is (right on a leaf, say).
    Stay,
}

/// What the keyboard acts on.
#[derive(Clone, Copy, Debug)]
pub(super) struct Nav<'a> {
    pub rows: &'a [Row],
    pub tree: &'a Tree,
    pub focused: Option<&'a str>,
}

/// The step `key` takes from `nav`. `None` leaves the key to the browser: there are
/// no spans, or the key needs a focused span and none is on screen.
pub(super) fn reduce(key: Key, nav: &Nav<'_>) -> Option<Step> {
    let rows = nav.rows;
    // Only span rows take focus; "load more" and loading rows are skipped.
    let spans = move || {
        rows.iter().enumerate().filter_map(|(row, r)| match r {
            Row::Node { id, depth } => Some((row, id.as_str(), *depth)),
            _ => None,
        })
    };
    let first = spans().next()?;
    let current = nav
        .focused
        .and_then(|f| spans().find(|&(_, id, _)| id == f));
    let focus = |(row, id, _): (usize, &str, usize)| Step::Focus {
        id: id.to_string(),
        row,
    };
    let step = match key {
        Key::Home => focus(first),
        Key::End => focus(spans().next_back().unwrap_or(first)),
        Key::Down => focus(match current {
            Some(at) => spans().find(|&(row, ..)| row > at.0).unwrap_or(at),
            None => first,
        }),
        Key::Up => focus(match current {
            Some(at) => spans()
                .take_while(|&(row, ..)| row < at.0)
                .last()
                .unwrap_or(at),
            None => first,
        }),
        Key::Right | Key::Left | Key::Enter | Key::Space => {
            let (row, id, depth) = current?;
            let open = nav.tree.is_expanded(id);
            match key {
                Key::Right if !open && nav.tree.has_children(id) => Step::Expand(id.into()),
                // To the first child, once it has loaded (past a large node's jump row).
                Key::Right if open => match spans().find(|&(r, ..)| r > row) {
                    Some(child @ (_, _, d)) if d == depth + 1 => focus(child),
                    _ => Step::Stay,
                },
                Key::Left if open => Step::Collapse(id.into()),
                // To the parent: the nearest row above one level up.
                Key::Left => spans()
                    .take_while(|&(r, ..)| r < row)
                    .filter(|&(.., d)| d + 1 == depth)
                    .last()
                    .map_or(Step::Stay, focus),
                Key::Enter | Key::Space => Step::Select(id.into()),
                _ => Step::Stay,
            }
        }
    };
    Some(step)
}

#[cfg(test)]
mod tests {
    use super::super::model::test_node as node;
    use super::*;

    /// root (open, 3 children: a, b open and loading, c), then "load more";
    /// then leaf, then shut (closed, 4 children).
    ///
    /// 0 root · 1 a · 2 b · 3 (loading) · 4 c · 5 (more) · 6 leaf · 7 shut
    fn tree() -> Tree {
        let mut tree = Tree::default();
        tree.add_page(
            "",
            vec![node("root", 5), node("leaf", 0), node("shut", 4)],
            None,
        );
        tree.set_expanded("root", true);
        tree.add_page(
            "root",
            vec![node("a", 0), node("b", 2), node("c", 0)],
            Some("next".into()),
        );
        tree.set_expanded("b", true);
        tree.set_loading("b", true);
        tree
    }

    fn press(key: Key, focused: Option<&str>) -> Option<Step> {
        let tree = tree();
        let rows = tree.rows();
        reduce(
            key,
            &Nav {
                rows: &rows,
                tree: &tree,
                focused,
            },
        )
    }

    fn focus(id: &str, row: usize) -> Option<Step> {
        Some(Step::Focus { id: id.into(), row })
    }

    #[test]
    fn the_fixture_draws_the_rows_the_tests_expect() {
        let tree = tree();
        let rows = tree.rows();
        assert_eq!(rows.len(), 8);
        assert_eq!(rows[3], Row::Loading { depth: 2 });
        assert!(matches!(&rows[5], Row::More { parent, .. } if parent == "root"));
        assert!(matches!(&rows[7], Row::Node { id, depth: 0 } if id == "shut"));
    }

    #[test]
    fn keys_map_from_the_dom() {
        assert_eq!(Key::from_dom("ArrowDown"), Some(Key::Down));
        assert_eq!(Key::from_dom(" "), Some(Key::Space));
        assert_eq!(Key::from_dom("Tab"), None);
        assert_eq!(Key::from_dom("a"), None);
    }

    #[test]
    fn down_moves_to_the_next_span_and_stops_at_the_last() {
        assert_eq!(press(Key::Down, Some("root")), focus("a", 1));
        // Over the loading row under b, and over "load more" after c.
        assert_eq!(press(Key::Down, Some("b")), focus("c", 4));
        assert_eq!(press(Key::Down, Some("c")), focus("leaf", 6));
        assert_eq!(press(Key::Down, Some("shut")), focus("shut", 7));
        // Nothing focused yet, or the focus scrolled out of the loaded rows.
        assert_eq!(press(Key::Down, None), focus("root", 0));
        assert_eq!(press(Key::Down, Some("gone")), focus("root", 0));
    }

    #[test]
    fn up_moves_to_the_previous_span_and_stops_at_the_first() {
        assert_eq!(press(Key::Up, Some("root")), focus("root", 0));
        assert_eq!(press(Key::Up, Some("a")), focus("root", 0));
        assert_eq!(press(Key::Up, Some("c")), focus("b", 2));
        assert_eq!(press(Key::Up, Some("leaf")), focus("c", 4));
        assert_eq!(press(Key::Up, Some("shut")), focus("leaf", 6));
        assert_eq!(press(Key::Up, None), focus("root", 0));
    }

    #[test]
    fn home_and_end_go_to_the_first_and_last_spans() {
        for from in [None, Some("root"), Some("b"), Some("shut")] {
            assert_eq!(press(Key::Home, from), focus("root", 0));
            assert_eq!(press(Key::End, from), focus("shut", 7));
        }
    }

    #[test]
    fn right_expands_a_collapsed_parent() {
        assert_eq!(
            press(Key::Right, Some("shut")),
            Some(Step::Expand("shut".into()))
        );
    }

    #[test]
    fn right_on_an_expanded_parent_moves_to_its_first_child() {
        assert_eq!(press(Key::Right, Some("root")), focus("a", 1));
    }

    #[test]
    fn right_waits_while_the_children_load() {
        // b is open but its row below is the loading row, not a child.
        assert_eq!(press(Key::Right, Some("b")), Some(Step::Stay));
    }

    #[test]
    fn right_on_a_leaf_does_nothing() {
        assert_eq!(press(Key::Right, Some("leaf")), Some(Step::Stay));
        assert_eq!(press(Key::Right, Some("c")), Some(Step::Stay));
    }

    #[test]
    fn left_collapses_an_expanded_parent() {
        assert_eq!(
            press(Key::Left, Some("root")),
            Some(Step::Collapse("root".into()))
        );
        assert_eq!(
            press(Key::Left, Some("b")),
            Some(Step::Collapse("b".into()))
        );
    }

    #[test]
    fn left_on_a_child_moves_to_its_parent() {
        assert_eq!(press(Key::Left, Some("a")), focus("root", 0));
        // Past a sibling's loading row.
        assert_eq!(press(Key::Left, Some("c")), focus("root", 0));
    }

    #[test]
    fn left_on_a_root_leaf_or_collapsed_root_does_nothing() {
        assert_eq!(press(Key::Left, Some("leaf")), Some(Step::Stay));
        assert_eq!(press(Key::Left, Some("shut")), Some(Step::Stay));
    }

    #[test]
    fn enter_and_space_select_the_focused_span() {
        assert_eq!(press(Key::Enter, Some("a")), Some(Step::Select("a".into())));
        assert_eq!(
            press(Key::Space, Some("shut")),
            Some(Step::Select("shut".into()))
        );
        // A parent is selected, not toggled.
        assert_eq!(
            press(Key::Enter, Some("root")),
            Some(Step::Select("root".into()))
        );
        assert_eq!(press(Key::Space, Some("b")), Some(Step::Select("b".into())));
    }

    #[test]
    fn keys_on_a_span_need_a_focused_one_on_screen() {
        for key in [Key::Left, Key::Right, Key::Enter, Key::Space] {
            assert_eq!(press(key, None), None);
            assert_eq!(press(key, Some("gone")), None);
        }
    }

    #[test]
    fn an_empty_tree_leaves_every_key_to_the_browser() {
        let tree = Tree::default();
        let nav = Nav {
            rows: &[],
            tree: &tree,
            focused: None,
        };
        for key in [
            Key::Up,
            Key::Down,
            Key::Home,
            Key::End,
            Key::Left,
            Key::Right,
            Key::Enter,
            Key::Space,
        ] {
            assert_eq!(reduce(key, &nav), None);
        }
    }
}
