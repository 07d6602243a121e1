//! Reading the tree from the API: the seed (with every level down to a deep-linked
//! span), further reads of a node's children, and the path to a selection the tree
//! has not loaded yet.

use std::collections::HashSet;

use leptos::prelude::*;
use treeline_wire::{SpanNode, SpanPage};

use super::model::{Lens, Level, Seed, Tree};
use crate::ui::api::{self, ApiError, SPAN_PAGE};

/// Reads the page of `parent`'s children that holds `want`, wherever it is among
/// them (the 90,000th of 100,000 included), or the first page.
async fn page_with(
    run: &str,
    trace: &str,
    parent: Option<&str>,
    want: Option<&str>,
) -> Result<Level, ApiError> {
    let ask = |around: Option<&str>| api::LevelQuery {
        parent: parent.map(str::to_string),
        around: around.map(str::to_string),
        limit: SPAN_PAGE,
        ..api::LevelQuery::default()
    };
    let page = match want {
        // A child that is not there (yet) still leaves the first page to show.
        Some(w) => match api::span_level(run.into(), trace.into(), ask(Some(w))).await {
            Ok(page) => page,
            Err(_) => api::span_level(run.into(), trace.into(), ask(None)).await?,
        },
        None => api::span_level(run.into(), trace.into(), ask(None)).await?,
    };
    Ok(level(parent.unwrap_or(""), page))
}

fn level(parent: &str, page: SpanPage) -> Level {
    Level {
        parent: parent.to_string(),
        from: page.from.unwrap_or(0),
        nodes: page.spans,
        cursor: page.next_cursor,
    }
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
            let first = path.first().map(String::as_str).or(span.as_deref());
            let mut levels = vec![page_with(&run, &trace_id, None, first).await?];
            for (i, parent) in path.iter().enumerate() {
                let want = path.get(i + 1).map(String::as_str).or(span.as_deref());
                levels.push(page_with(&run, &trace_id, Some(parent), want).await?);
            }
            let mut open = path;
            // A trace opened at its root shows the root's children too.
            if open.is_empty() {
                if let Some(root) = single_parent(&levels[0].nodes) {
                    levels.push(page_with(&run, &trace_id, Some(&root), None).await?);
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
        let (cursor, first, lens) = self.tree.with_untracked(|t| {
            (
                t.next_cursor(&parent),
                !t.is_loaded(&parent),
                t.lens(&parent),
            )
        });
        if !first && cursor.is_none() {
            return;
        }
        let ask = api::LevelQuery {
            cursor,
            name: lens.name,
            limit: SPAN_PAGE,
            ..api::LevelQuery::default()
        };
        self.read(parent, ask, |t, parent, page| {
            t.add_page(parent, page.spans, page.next_cursor);
        });
    }

    /// Shows `parent`'s children as `lens` says: from a place on ("go to child
    /// N"), or only those whose name holds some letters.
    pub(super) fn jump(self, parent: String, lens: Lens) {
        let ask = api::LevelQuery {
            from: Some(lens.from),
            name: lens.name.clone(),
            limit: SPAN_PAGE,
            ..api::LevelQuery::default()
        };
        self.read(parent, ask, move |t, parent, page| {
            let lens = Lens {
                from: page.from.unwrap_or(lens.from),
                name: lens.name.clone(),
            };
            t.replace_children(parent, page.spans, page.next_cursor, lens);
        });
    }

    /// Reads the page before the first loaded child of `parent`.
    pub(super) fn earlier(self, parent: String) {
        let lens = self.tree.with_untracked(|t| t.lens(&parent));
        let from = lens.from.saturating_sub(SPAN_PAGE as i64).max(0);
        let ask = api::LevelQuery {
            from: Some(from),
            name: lens.name,
            limit: usize::try_from(lens.from - from).unwrap_or(0),
            ..api::LevelQuery::default()
        };
        if ask.limit > 0 {
            self.read(parent, ask, |t, parent, page| {
                t.add_earlier(parent, page.spans)
            });
        }
    }

    /// Reads one page of `parent`'s children as `ask` says (its parent set here)
    /// and hands it to `apply`; one read per node at a time, since a second would
    /// add its children twice.
    fn read(
        self,
        parent: String,
        mut ask: api::LevelQuery,
        apply: impl FnOnce(&mut Tree, &str, SpanPage) + 'static,
    ) {
        if self.tree.with_untracked(|t| t.is_loading(&parent)) {
            return;
        }
        let (run, trace) = self.ids.get_value();
        let tree = self.tree;
        tree.update(|t| t.set_loading(&parent, true));
        ask.parent = (!parent.is_empty()).then(|| parent.clone());
        leptos::task::spawn_local(async move {
            match api::span_level(run, trace, ask).await {
                Ok(page) => tree.update(|t| {
                    t.set_loading(&parent, false);
                    apply(t, &parent, page);
                }),
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
        if let Ok(level) = page_with(&run, &trace, arg, Some(want)).await {
            let lens = Lens {
                from: level.from,
                name: None,
            };
            tree.update(|t| t.replace_children(parent, level.nodes, level.cursor, lens));
        }
    }
    tree.update(|t| t.expand_all(&detail.path));
}
