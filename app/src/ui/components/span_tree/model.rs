//! The loaded part of the span tree and the rows it shows: plain data, no signals,
//! so the keyboard and the loaders can be tested without a browser.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use treeline_wire::limits::SPAN_PAGE;
use treeline_wire::{SpanNode, TraceSummary};

/// Children past which a node offers a jump bar (more than one page).
const JUMP_PAST: i64 = SPAN_PAGE as i64;

/// What the tree starts from: the trace, its roots, and the children of each node
/// on the path to a deep-linked span. Built on the server and handed to hydration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Seed {
    pub run_id: String,
    pub trace: TraceSummary,
    /// The roots (under "") and the children of each node on the path.
    pub levels: Vec<Level>,
    /// The nodes to open: the path down to the deep-linked span.
    pub open: Vec<String>,
}

/// One read of a node's children.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Level {
    pub parent: String,
    pub nodes: Vec<SpanNode>,
    pub cursor: Option<String>,
    /// The first node's place among the children.
    pub from: i64,
}

/// Which of a node's children are loaded: those from a place on, and, when `name`
/// is given, only those whose name holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Lens {
    /// The first loaded child's place among those listed, counted from 0.
    pub from: i64,
    pub name: Option<String>,
}

/// The loaded part of the tree.
#[derive(Clone, Debug, Default)]
pub(super) struct Tree {
    nodes: HashMap<String, SpanNode>,
    children: HashMap<String, Vec<String>>,
    cursors: HashMap<String, Option<String>>,
    /// Nodes whose loaded children start past the first or are filtered by name.
    lenses: HashMap<String, Lens>,
    expanded: HashSet<String>,
    loading: HashSet<String>,
}

/// A drawn row: its index, the row, and its span (for a span row).
pub(super) type Drawn = (usize, Row, Option<SpanNode>);

/// One line of the tree as drawn.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Row {
    Node {
        id: String,
        depth: usize,
    },
    More {
        parent: String,
        depth: usize,
        /// Unknown when the children are filtered by name.
        remaining: Option<i64>,
    },
    /// A large node's jump bar, above its children: which are loaded, "go to
    /// child N" and "find by name".
    Jump {
        parent: String,
        depth: usize,
        lens: Lens,
        loaded: usize,
    },
    /// Above children loaded from a place past the first: how many come before.
    Earlier {
        parent: String,
        depth: usize,
        before: i64,
    },
    Loading {
        depth: usize,
    },
}

impl Tree {
    pub(super) fn from_seed(seed: &Seed) -> Tree {
        let mut tree = Tree::default();
        for level in &seed.levels {
            let lens = Lens {
                from: level.from,
                name: None,
            };
            tree.replace_children(
                &level.parent,
                level.nodes.clone(),
                level.cursor.clone(),
                lens,
            );
        }
        tree.expanded.extend(seed.open.iter().cloned());
        tree
    }

    pub(super) fn add_page(&mut self, parent: &str, nodes: Vec<SpanNode>, cursor: Option<String>) {
        let list = self.children.entry(parent.to_string()).or_default();
        for node in nodes {
            if !self.nodes.contains_key(&node.span_id) {
                list.push(node.span_id.clone());
            }
            self.nodes.insert(node.span_id.clone(), node);
        }
        self.cursors.insert(parent.to_string(), cursor);
        self.loading.remove(parent);
    }

    /// Drops what was loaded under `parent` for a read from elsewhere in its
    /// children (a jump, a search by name, the page around a deep-linked child).
    pub(super) fn replace_children(
        &mut self,
        parent: &str,
        nodes: Vec<SpanNode>,
        cursor: Option<String>,
        lens: Lens,
    ) {
        self.drop_children(parent);
        self.set_lens(parent, lens);
        self.add_page(parent, nodes, cursor);
    }

    /// Records which of `parent`'s children are loaded; all from the first is no lens.
    fn set_lens(&mut self, parent: &str, lens: Lens) {
        if lens == Lens::default() {
            self.lenses.remove(parent);
        } else {
            self.lenses.insert(parent.to_string(), lens);
        }
    }

    /// Forgets `parent`'s loaded children, so a later read lists them afresh (a
    /// known span is otherwise never listed twice).
    fn drop_children(&mut self, parent: &str) {
        for id in self.children.remove(parent).unwrap_or_default() {
            self.nodes.remove(&id);
        }
    }

    /// Puts the page before the first loaded child of `parent` in front of it.
    pub(super) fn add_earlier(&mut self, parent: &str, nodes: Vec<SpanNode>) {
        let fresh: Vec<String> = nodes
            .iter()
            .map(|n| n.span_id.clone())
            .filter(|id| !self.nodes.contains_key(id))
            .collect();
        let mut lens = self.lens(parent);
        lens.from = (lens.from - nodes.len() as i64).max(0);
        self.set_lens(parent, lens);
        self.children
            .entry(parent.to_string())
            .or_default()
            .splice(0..0, fresh);
        self.absorb(nodes);
    }

    /// Which of `parent`'s children are loaded.
    pub(super) fn lens(&self, parent: &str) -> Lens {
        self.lenses.get(parent).cloned().unwrap_or_default()
    }

    /// Takes a fresh read of the first children of `parent` (as many as were loaded,
    /// or more): spans that changed or arrived since show up in place, and children
    /// loaded past that read are kept unless the read was complete.
    pub(super) fn refresh(&mut self, parent: &str, nodes: Vec<SpanNode>, cursor: Option<String>) {
        let old = self.children.remove(parent).unwrap_or_default();
        let mut list: Vec<String> = nodes.iter().map(|n| n.span_id.clone()).collect();
        if cursor.is_some() {
            let fresh: HashSet<&String> = list.iter().collect();
            let tail: Vec<String> = old.into_iter().filter(|id| !fresh.contains(id)).collect();
            if !tail.is_empty() {
                // Keep the cursor that continues past the children already loaded.
                list.extend(tail);
                self.children.insert(parent.to_string(), list);
                self.absorb(nodes);
                return;
            }
        }
        self.children.insert(parent.to_string(), list);
        self.cursors.insert(parent.to_string(), cursor);
        self.absorb(nodes);
    }

    fn absorb(&mut self, nodes: Vec<SpanNode>) {
        for node in nodes {
            self.nodes.insert(node.span_id.clone(), node);
        }
    }

    /// The parents whose children are on screen (the roots and open nodes) and
    /// loaded from the first, with how many each has loaded; a node jumped into or
    /// searched keeps what it shows. Collapsed nodes forget theirs, to be read
    /// afresh when opened.
    pub(super) fn visible_parents(&mut self) -> Vec<(String, usize)> {
        let expanded = std::mem::take(&mut self.expanded);
        let shown = |parent: &String| parent.is_empty() || expanded.contains(parent);
        let hidden: Vec<String> = self
            .children
            .keys()
            .filter(|p| !shown(p))
            .cloned()
            .collect();
        for parent in hidden {
            self.drop_children(&parent);
        }
        self.cursors.retain(|parent, _| shown(parent));
        self.lenses.retain(|parent, _| shown(parent));
        self.expanded = expanded;
        self.children
            .iter()
            .filter(|(parent, _)| !self.lenses.contains_key(*parent))
            .map(|(parent, ids)| (parent.clone(), ids.len()))
            .collect()
    }

    pub(super) fn node(&self, id: &str) -> Option<&SpanNode> {
        self.nodes.get(id)
    }

    pub(super) fn has_children(&self, id: &str) -> bool {
        self.node(id).is_some_and(|n| n.child_count > 0)
    }

    pub(super) fn is_expanded(&self, id: &str) -> bool {
        self.expanded.contains(id)
    }

    /// Whether a first read of `parent`'s children has arrived.
    pub(super) fn is_loaded(&self, parent: &str) -> bool {
        self.children.contains_key(parent)
    }

    /// Where the next read of `parent`'s children starts, if there is more to read.
    pub(super) fn next_cursor(&self, parent: &str) -> Option<String> {
        self.cursors.get(parent).cloned().flatten()
    }

    /// Whether a page of `parent`'s children is being read.
    pub(super) fn is_loading(&self, parent: &str) -> bool {
        self.loading.contains(parent)
    }

    pub(super) fn set_loading(&mut self, parent: &str, loading: bool) {
        if loading {
            self.loading.insert(parent.to_string());
        } else {
            self.loading.remove(parent);
        }
    }

    /// Opens or closes `id`. True when it opened with no children loaded, which the
    /// caller then reads.
    pub(super) fn set_expanded(&mut self, id: &str, open: bool) -> bool {
        if open {
            self.expanded.insert(id.to_string());
        } else {
            self.expanded.remove(id);
        }
        open && !self.is_loaded(id)
    }

    pub(super) fn expand_all(&mut self, ids: &[String]) {
        self.expanded.extend(ids.iter().cloned());
    }

    /// The rows a reader sees, depth first through expanded nodes.
    pub(super) fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        self.walk("", 0, &mut rows);
        rows
    }

    /// Row `i` of `rows` with its span (a span row's, or a jump bar's node), borrowed:
    /// a kept element compares it with what it shows before cloning anything.
    pub(super) fn row_at<'a>(
        &'a self,
        rows: &'a [Row],
        i: usize,
    ) -> Option<(&'a Row, Option<&'a SpanNode>)> {
        let row = rows.get(i)?;
        let node = match row {
            Row::Node { id, .. } => self.node(id),
            // The jump bar shows its node's child count.
            Row::Jump { parent, .. } => self.node(parent),
            _ => None,
        };
        Some((row, node))
    }

    fn walk(&self, parent: &str, depth: usize, rows: &mut Vec<Row>) {
        let Some(ids) = self.children.get(parent) else {
            return;
        };
        let lens = self.lens(parent);
        let total = self.nodes.get(parent).map_or(0, |n| n.child_count);
        if !parent.is_empty() && (total > JUMP_PAST || lens != Lens::default()) {
            rows.push(Row::Jump {
                parent: parent.to_string(),
                depth,
                lens: lens.clone(),
                loaded: ids.len(),
            });
        }
        if lens.from > 0 {
            rows.push(Row::Earlier {
                parent: parent.to_string(),
                depth,
                before: lens.from,
            });
        }
        for id in ids {
            rows.push(Row::Node {
                id: id.clone(),
                depth,
            });
            if self.expanded.contains(id) {
                if self.children.contains_key(id) {
                    self.walk(id, depth + 1, rows);
                }
                if self.loading.contains(id) {
                    rows.push(Row::Loading { depth: depth + 1 });
                }
            }
        }
        if self.cursors.get(parent).is_some_and(Option::is_some) {
            let remaining = lens
                .name
                .is_none()
                .then(|| (total - lens.from - ids.len() as i64).max(0));
            rows.push(Row::More {
                parent: parent.to_string(),
                depth,
                remaining,
            });
        }
    }
}

/// A span of `children` children, for tests here and in the keyboard's.
#[cfg(test)]
pub(super) fn test_node(id: &str, children: i64) -> SpanNode {
    SpanNode {
        span_id: id.into(),
        parent_span_id: None,
        name: id.into(),
        kind: treeline_wire::SpanKind::Custom,
        status: treeline_wire::SpanStatus::Ok,
        start_us: 0,
        end_us: Some(1),
        duration_us: Some(1),
        step: None,
        rank: None,
        child_count: children,
        error_count: 0,
        token_count: None,
        orphan: false,
        ordinal: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::test_node as node;
    use super::*;
    use treeline_wire::SpanStatus;

    #[test]
    fn rows_follow_expanded_nodes_and_offer_more() {
        let mut tree = Tree::default();
        tree.add_page("", vec![node("root", 500)], None);
        tree.add_page(
            "root",
            vec![node("a", 0), node("b", 0)],
            Some("next".into()),
        );
        assert_eq!(
            tree.rows(),
            vec![Row::Node {
                id: "root".into(),
                depth: 0
            }]
        );
        tree.expanded.insert("root".into());
        let rows = tree.rows();
        assert_eq!(rows.len(), 5);
        // More than a page of children: a jump bar above them.
        assert!(matches!(&rows[1], Row::Jump { parent, loaded: 2, .. } if parent == "root"));
        assert_eq!(
            rows[4],
            Row::More {
                parent: "root".into(),
                depth: 1,
                remaining: Some(498)
            }
        );
    }

    #[test]
    fn opening_asks_for_children_only_the_first_time() {
        let mut tree = Tree::default();
        tree.add_page("", vec![node("root", 2)], None);
        assert!(tree.set_expanded("root", true));
        tree.set_loading("root", true);
        assert_eq!(tree.rows()[1], Row::Loading { depth: 1 });
        tree.add_page("root", vec![node("a", 0), node("b", 0)], None);
        assert!(!tree.set_expanded("root", false));
        assert!(!tree.set_expanded("root", true));
        assert_eq!(tree.rows().len(), 3);
    }

    #[test]
    fn a_slice_of_rows_comes_with_its_spans() {
        let mut tree = Tree::default();
        tree.add_page("", vec![node("root", 2)], Some("more".into()));
        tree.expanded.insert("root".into());
        tree.add_page("root", vec![node("a", 0), node("b", 0)], None);
        let rows = tree.rows();
        assert_eq!(rows.len(), 4);
        let got: Vec<_> = (2..9)
            .map_while(|i| tree.row_at(&rows, i))
            .map(|(_, n)| n.map(|n| n.span_id.as_str()))
            .collect();
        // b, then the roots' "load more", which has no span.
        assert_eq!(got, [Some("b"), None]);
        assert!(tree.row_at(&rows, 7).is_none());
    }

    fn ids(tree: &Tree, parent: &str) -> Vec<String> {
        tree.children.get(parent).cloned().unwrap_or_default()
    }

    #[test]
    fn a_refresh_updates_in_place_and_keeps_children_loaded_past_it() {
        let mut tree = Tree::default();
        tree.add_page("", vec![node("root", 2)], None);
        tree.expanded.insert("root".into());
        tree.add_page("root", vec![node("a", 0), node("b", 0)], None);

        let mut failed = node("a", 0);
        failed.status = SpanStatus::Error;
        tree.refresh("root", vec![failed, node("b", 0), node("c", 0)], None);
        assert_eq!(ids(&tree, "root"), ["a", "b", "c"]);
        assert_eq!(tree.node("a").map(|n| n.status), Some(SpanStatus::Error));

        // A read shorter than what was loaded keeps the rest and its cursor.
        tree.add_page("root", vec![node("d", 0)], Some("after-d".into()));
        tree.refresh(
            "root",
            vec![node("a", 0), node("b", 0)],
            Some("after-b".into()),
        );
        assert_eq!(ids(&tree, "root"), ["a", "b", "c", "d"]);
        assert_eq!(tree.next_cursor("root").as_deref(), Some("after-d"));

        // Children of a collapsed node are forgotten, to be read again on opening.
        tree.add_page("a", vec![node("a1", 0)], None);
        let mut parents = tree.visible_parents();
        parents.sort();
        assert_eq!(parents, [(String::new(), 1), ("root".to_string(), 4)]);
        assert!(!tree.children.contains_key("a"));
        tree.add_page("a", vec![node("a1", 0)], None);
        assert_eq!(ids(&tree, "a"), ["a1"]);
    }

    #[test]
    fn a_jump_shows_children_from_a_place_and_earlier_pages_go_in_front() {
        let mut tree = Tree::default();
        tree.add_page("", vec![node("root", 1_000)], None);
        tree.expanded.insert("root".into());
        let at = |from| Lens { from, name: None };
        tree.replace_children(
            "root",
            vec![node("c500", 0), node("c501", 0)],
            Some("next".into()),
            at(500),
        );
        let rows = tree.rows();
        assert_eq!(
            rows[2],
            Row::Earlier {
                parent: "root".into(),
                depth: 1,
                before: 500
            }
        );
        assert_eq!(
            rows[3],
            Row::Node {
                id: "c500".into(),
                depth: 1
            }
        );
        assert!(matches!(
            rows[5],
            Row::More {
                remaining: Some(498),
                ..
            }
        ));
        // A jumped-into node is not refreshed from its first child.
        assert_eq!(tree.visible_parents(), [(String::new(), 1)]);

        tree.add_earlier("root", vec![node("c498", 0), node("c499", 0)]);
        assert_eq!(ids(&tree, "root"), ["c498", "c499", "c500", "c501"]);
        assert_eq!(tree.lens("root"), at(498));

        // Back to the start: the lens goes, and with it the "earlier" row; spans
        // seen before are listed again.
        for _ in 0..2 {
            let first = vec![node("c0", 0), node("c1", 0)];
            tree.replace_children("root", first, Some("next".into()), Lens::default());
        }
        assert_eq!(ids(&tree, "root"), ["c0", "c1"]);
        assert!(!tree.rows().iter().any(|r| matches!(r, Row::Earlier { .. })));
        assert_eq!(tree.visible_parents().len(), 2);
    }

    #[test]
    fn children_found_by_name_have_no_count_left_and_keep_their_bar() {
        let mut tree = Tree::default();
        tree.add_page("", vec![node("root", 3)], None);
        tree.expanded.insert("root".into());
        let lens = Lens {
            from: 0,
            name: Some("tool".into()),
        };
        tree.replace_children(
            "root",
            vec![node("tool-1", 0)],
            Some("next".into()),
            lens.clone(),
        );
        let rows = tree.rows();
        // Three children would not earn a bar, but a search keeps it, to be cleared.
        assert_eq!(
            rows[1],
            Row::Jump {
                parent: "root".into(),
                depth: 1,
                lens,
                loaded: 1
            }
        );
        assert!(matches!(
            rows[3],
            Row::More {
                remaining: None,
                ..
            }
        ));
    }
}
