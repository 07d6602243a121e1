//! Reading the tree from the API: the seed (with every level down to a deep-linked
//! span), further reads of a node's children, and the path to a selection the tree
//! has not loaded yet.

use std::collections::HashSet;

use leptos::prelude::*;
use treeline_wire::SpanNode;

use super::model::{Seed, Tree};
use crate::ui::api::{self, ApiError};

/// Reads walked to find a deep-linked span among a node's children.
const MAX_PAGES: usize = 60;

/// Reads `parent`'s children until `want` is among them (or there are no more).
async fn page_until(
    run: &str,
    trace: &str,
    parent: Option<&str>,
    want: Option<&str>,
) -> Result<(Vec<SpanNode>, Option<String>), ApiError> {
    let mut nodes = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let page = api::spans(run.into(), trace.into(), parent.map(str::to_string), cursor).await?;
        nodes.extend(page.spans);
        cursor = page.next_cursor;
        let found = want.is_none_or(|w| nodes.iter().any(|n| n.span_id == w));
        if found || cursor.is_none() {
            break;
        }
    }
    Ok((nodes, cursor))
}

/// The one root of a trace, when it is the only one and has children.
fn single_parent(roots: &[SpanNode]) -> Option<String> {
    match roots {
        [root] if root.child_count > 0 => Some(root.span_id.clone()),
        _ => None,
    }
}

/// Loads the trace and, for a deep link, every level down to `span`; a trace
/// opened at its root also gets the root's children.
pub(crate) async fn load_seed(
    key: Option<(String, String)>,
    span: Option<String>,
) -> Option<Result<Seed, ApiError>> {
    let (run, trace_id) = key?;
    Some(
        async move {
            let trace = api::trace(run.clone(), trace_id.clone()).await?;
            let path = match &span {
                Some(s) => match api::span(run.clone(), trace_id.clone(), s.clone()).await {
                    Ok(d) => d.path,
                    Err(_) => Vec::new(), // the inspector says it is missing
                },
                None => Vec::new(),
            };
            let mut levels = Vec::new();
            let first = path.first().map(String::as_str).or(span.as_deref());
            let (roots, cursor) = page_until(&run, &trace_id, None, first).await?;
            levels.push((String::new(), roots, cursor));
            for (i, parent) in path.iter().enumerate() {
                let want = path.get(i + 1).map(String::as_str).or(span.as_deref());
                let (nodes, cursor) = page_until(&run, &trace_id, Some(parent), want).await?;
                levels.push((parent.clone(), nodes, cursor));
            }
            let mut open = path;
            // A trace opened at its root shows the root's children too.
            if open.is_empty() {
                if let Some(root) = single_parent(&levels[0].1) {
                    let (nodes, cursor) = page_until(&run, &trace_id, Some(&root), None).await?;
                    levels.push((root.clone(), nodes, cursor));
                    open.push(root);
                }
            }
            Ok(Seed {
                run_id: run,
                trace,
                levels,
                open,
            })
        }
        .await,
    )
}

/// Reads one trace's spans into its tree. Copy, so every handler can hold one.
#[derive(Clone, Copy)]
pub(super) struct Loader {
    tree: RwSignal<Tree>,
    /// (run, trace)
    ids: StoredValue<(String, String)>,
    /// The pages read ahead, as (parent, cursor): each is read ahead once, so a
    /// page that failed waits for a click instead of being asked for again and again.
    read_ahead: StoredValue<HashSet<(String, Option<String>)>>,
}

impl Loader {
    pub(super) fn new(tree: RwSignal<Tree>, run: String, trace: String) -> Self {
        Loader {
            tree,
            ids: StoredValue::new((run, trace)),
            read_ahead: StoredValue::new(HashSet::new()),
        }
    }

    /// Reads the next page of `parent`'s children as the reader scrolls toward
    /// its end, once per page.
    pub(super) fn read_ahead(self, parent: String) {
        let cursor = self.tree.with_untracked(|t| t.next_cursor(&parent));
        let first = self
            .read_ahead
            .try_update_value(|asked| asked.insert((parent.clone(), cursor)))
            .unwrap_or(false);
        if first {
            self.more(parent);
        }
    }

    /// Opens or closes `id`, reading its children when it opens without them.
    pub(super) fn toggle(self, id: String) {
        let open = !self.tree.with_untracked(|t| t.is_expanded(&id));
        if self.tree.try_update(|t| t.set_expanded(&id, open)) == Some(true) {
            self.more(id);
        }
    }

    /// Reads the next page of `parent`'s children (the roots for "").
    pub(super) fn more(self, parent: String) {
        let (cursor, first) = self
            .tree
            .with_untracked(|t| (t.next_cursor(&parent), !t.is_loaded(&parent)));
        // A page already on its way: a second read would add its children twice.
        if (!first && cursor.is_none()) || self.tree.with_untracked(|t| t.is_loading(&parent)) {
            return;
        }
        let (run, trace) = self.ids.get_value();
        let tree = self.tree;
        tree.update(|t| t.set_loading(&parent, true));
        leptos::task::spawn_local(async move {
            let parent_arg = (!parent.is_empty()).then(|| parent.clone());
            match api::spans(run, trace, parent_arg, cursor).await {
                Ok(page) => tree.update(|t| t.add_page(&parent, page.spans, page.next_cursor)),
                Err(e) => {
                    leptos::logging::warn!("children of {parent} failed: {}", e.message);
                    tree.update(|t| t.set_loading(&parent, false));
                }
            }
        });
    }

    /// Opens the path to a selection the tree has not loaded yet (back/forward, a
    /// link in the inspector).
    pub(super) fn follow(self, selected: Memo<Option<String>>) {
        Effect::new(move |first_run: Option<()>| {
            // The first selection came with the seed, path and all.
            let Some(span) = selected.get().filter(|_| first_run.is_some()) else {
                return;
            };
            if self.tree.with_untracked(|t| t.node(&span).is_some()) {
                return;
            }
            let (run, trace) = self.ids.get_value();
            leptos::task::spawn_local(open_path(self.tree, run, trace, span));
        });
    }
}

async fn open_path(tree: RwSignal<Tree>, run: String, trace: String, span: String) {
    let Ok(detail) = api::span(run.clone(), trace.clone(), span.clone()).await else {
        return;
    };
    let mut parents = vec![String::new()];
    parents.extend(detail.path.iter().cloned());
    for (i, parent) in parents.iter().enumerate() {
        let want = detail.path.get(i).map(String::as_str).unwrap_or(&span);
        if tree.with_untracked(|t| t.node(want).is_some()) {
            continue;
        }
        let arg = (!parent.is_empty()).then_some(parent.as_str());
        if let Ok((nodes, cursor)) = page_until(&run, &trace, arg, Some(want)).await {
            tree.update(|t| t.replace_children(parent, nodes, cursor));
        }
    }
    tree.update(|t| t.expand_all(&detail.path));
}
