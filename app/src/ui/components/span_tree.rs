//! The span tree: roots on select, children fetched on expand, "load more" past a
//! page, and only the rows in view rendered, so a node of 10,000 children scrolls as
//! easily as one of ten. It follows the WAI-ARIA tree pattern.

use std::collections::{HashMap, HashSet};

use leptos::prelude::*;
use leptos::tachys::html::attribute::custom::custom_attribute;
use serde::{Deserialize, Serialize};

use crate::ui::api::{self, ApiError};
use crate::ui::format;
use crate::ui::pages::traces::WorkspaceUrl;
use crate::wire::{SpanNode, SpanStatus, TraceSummary};

const ROW: f64 = 26.0;
const OVERSCAN: usize = 12;
const INDENT: usize = 16;
/// Pages walked to find a deep-linked span among a node's children.
const MAX_PAGES: usize = 60;
/// How often an open running trace is read again.
const REFRESH_MS: u64 = 3_000;

/// What the tree starts from: the trace, its roots, and the pages of children along
/// the path to a deep-linked span. Built on the server and handed to hydration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Seed {
    pub run_id: String,
    pub trace: TraceSummary,
    /// (parent, children, next cursor); the roots under "".
    pub pages: Vec<(String, Vec<SpanNode>, Option<String>)>,
    pub open: Vec<String>,
}

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

/// Loads the trace and, for a deep link, every level down to `span`.
pub async fn load_seed(
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
            let mut pages = Vec::new();
            let first = path.first().map(String::as_str).or(span.as_deref());
            let (roots, cursor) = page_until(&run, &trace_id, None, first).await?;
            pages.push((String::new(), roots, cursor));
            for (i, parent) in path.iter().enumerate() {
                let want = path.get(i + 1).map(String::as_str).or(span.as_deref());
                let (nodes, cursor) = page_until(&run, &trace_id, Some(parent), want).await?;
                pages.push((parent.clone(), nodes, cursor));
            }
            Ok(Seed {
                run_id: run,
                trace,
                pages,
                open: path,
            })
        }
        .await,
    )
}

/// The loaded part of the tree.
#[derive(Clone, Debug, Default)]
pub struct Tree {
    nodes: HashMap<String, SpanNode>,
    children: HashMap<String, Vec<String>>,
    cursors: HashMap<String, Option<String>>,
    expanded: HashSet<String>,
    loading: HashSet<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Row {
    Node {
        id: String,
        depth: usize,
    },
    More {
        parent: String,
        depth: usize,
        remaining: i64,
    },
    Loading {
        depth: usize,
    },
}

impl Tree {
    pub fn from_seed(seed: &Seed) -> Tree {
        let mut tree = Tree::default();
        for (parent, nodes, cursor) in &seed.pages {
            tree.add_page(parent, nodes.clone(), cursor.clone());
        }
        tree.expanded.extend(seed.open.iter().cloned());
        tree
    }

    pub fn add_page(&mut self, parent: &str, nodes: Vec<SpanNode>, cursor: Option<String>) {
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

    /// Takes a fresh read of the first children of `parent` (as many as were loaded,
    /// or more): spans that changed or arrived since show up in place, and children
    /// loaded past that read are kept unless the read was complete.
    pub fn refresh(&mut self, parent: &str, nodes: Vec<SpanNode>, cursor: Option<String>) {
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

    /// The parents whose children are on screen (the roots and open nodes), with how
    /// many children each has loaded. Collapsed nodes forget theirs, to be read
    /// afresh when opened.
    fn visible_parents(&mut self) -> Vec<(String, usize)> {
        let expanded = &self.expanded;
        self.children
            .retain(|parent, _| parent.is_empty() || expanded.contains(parent));
        self.cursors
            .retain(|parent, _| parent.is_empty() || expanded.contains(parent));
        self.children
            .iter()
            .map(|(parent, ids)| (parent.clone(), ids.len()))
            .collect()
    }

    pub fn node(&self, id: &str) -> Option<&SpanNode> {
        self.nodes.get(id)
    }

    /// The rows a reader sees, depth first through expanded nodes.
    pub fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        self.walk("", 0, &mut rows);
        rows
    }

    fn walk(&self, parent: &str, depth: usize, rows: &mut Vec<Row>) {
        let Some(ids) = self.children.get(parent) else {
            return;
        };
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
            let total = self.nodes.get(parent).map_or(0, |n| n.child_count);
            let remaining = (total - ids.len() as i64).max(0);
            rows.push(Row::More {
                parent: parent.to_string(),
                depth,
                remaining,
            });
        }
    }

    fn parent_of(&self, id: &str) -> Option<String> {
        self.children
            .iter()
            .find(|(_, ids)| ids.iter().any(|c| c == id))
            .map(|(p, _)| p.clone())
            .filter(|p| !p.is_empty())
    }
}

/// Fetches the next page of `parent`'s children (the roots for "") into `tree`.
fn fetch_children(tree: RwSignal<Tree>, run: String, trace: String, parent: String) {
    let cursor = tree.with_untracked(|t| t.cursors.get(&parent).cloned().flatten());
    let first = tree.with_untracked(|t| !t.children.contains_key(&parent));
    if !first && cursor.is_none() {
        return;
    }
    tree.update(|t| {
        t.loading.insert(parent.clone());
    });
    leptos::task::spawn_local(async move {
        let parent_arg = (!parent.is_empty()).then(|| parent.clone());
        match api::spans(run, trace, parent_arg, cursor).await {
            Ok(page) => tree.update(|t| t.add_page(&parent, page.spans, page.next_cursor)),
            Err(e) => {
                leptos::logging::warn!("children of {parent} failed: {}", e.message);
                tree.update(|t| {
                    t.loading.remove(&parent);
                });
            }
        }
    });
}

#[component]
pub fn SpanTree(
    url: Memo<WorkspaceUrl>,
    seed: Resource<Option<Result<Seed, ApiError>>>,
    go_to: Callback<WorkspaceUrl>,
    /// Bumped when a refresh changed the selected span, so the inspector rereads it.
    refreshed: RwSignal<u32>,
) -> impl IntoView {
    view! {
        <Suspense fallback=|| view! { <p class="loading">"Loading spans…"</p> }>
            {move || Suspend::new(async move {
                match seed.await {
                    None => view! {
                        <div class="pane-head"><strong>"Spans"</strong></div>
                        <p class="empty">"Select a trace on the left to see its spans."</p>
                    }.into_any(),
                    Some(Err(e)) => view! {
                        <div class="pane-head"><strong>"Spans"</strong></div>
                        <p class="error" role="alert">{e.message}</p>
                    }.into_any(),
                    Some(Ok(seed)) => view! { <TreeView seed url go_to refreshed/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn TreeView(
    seed: Seed,
    url: Memo<WorkspaceUrl>,
    go_to: Callback<WorkspaceUrl>,
    refreshed: RwSignal<u32>,
) -> impl IntoView {
    let tree = RwSignal::new(Tree::from_seed(&seed));
    let (run, trace_id) = (seed.run_id.clone(), seed.trace.trace_id.clone());
    let trace = RwSignal::new(seed.trace.clone());
    // The bars' time axis; a running trace's ends now.
    let axis = Memo::new(move |_| {
        trace.with(|t| {
            let t0 = t.start_us.unwrap_or(0);
            (t0, t.end_us.unwrap_or_else(format::now_us).max(t0 + 1))
        })
    });
    let rows = Memo::new(move |_| tree.with(Tree::rows));
    let selected = Memo::new(move |_| url.get().span_id);
    live_refresh(tree, trace, selected, refreshed);
    let focused = RwSignal::new(selected.get_untracked());
    let row_index = move |id: &str| {
        rows.with_untracked(|r| {
            r.iter()
                .position(|row| matches!(row, Row::Node { id: x, .. } if x == id))
        })
    };
    // Start scrolled to a deep-linked row, on the server and after hydration alike.
    let initial_top = selected
        .get_untracked()
        .and_then(|s| row_index(&s))
        .map_or(0.0, |i| (i as f64 * ROW - 120.0).max(0.0));
    let scroll_top = RwSignal::new(initial_top);
    let height = RwSignal::new(900.0);
    let scroller = NodeRef::<leptos::html::Div>::new();
    Effect::new(move |_| {
        if let Some(el) = scroller.get() {
            el.set_scroll_top(initial_top as i32);
            height.set(f64::from(el.client_height()).max(200.0));
        }
    });

    // A selection the tree has not loaded yet (back/forward, a link in the
    // inspector): open the path to it.
    {
        let (run, trace_id) = (run.clone(), trace_id.clone());
        Effect::new(move |first_run: Option<()>| {
            // The first selection came with the seed, path and all.
            let Some(span) = selected.get().filter(|_| first_run.is_some()) else {
                return;
            };
            if tree.with_untracked(|t| t.node(&span).is_some()) {
                return;
            }
            let (run, trace_id) = (run.clone(), trace_id.clone());
            leptos::task::spawn_local(async move {
                let Ok(detail) = api::span(run.clone(), trace_id.clone(), span.clone()).await
                else {
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
                    if let Ok((nodes, cursor)) = page_until(&run, &trace_id, arg, Some(want)).await
                    {
                        tree.update(|t| {
                            t.children.remove(parent);
                            t.add_page(parent, nodes, cursor);
                        });
                    }
                }
                tree.update(|t| t.expanded.extend(detail.path.iter().cloned()));
            });
        });
    }

    let toggle = {
        let (run, trace_id) = (run.clone(), trace_id.clone());
        move |id: String| {
            let open = tree.with_untracked(|t| t.expanded.contains(&id));
            tree.update(|t| {
                if open {
                    t.expanded.remove(&id);
                } else {
                    t.expanded.insert(id.clone());
                }
            });
            if !open && tree.with_untracked(|t| !t.children.contains_key(&id)) {
                fetch_children(tree, run.clone(), trace_id.clone(), id);
            }
        }
    };
    let toggle = StoredValue::new(toggle);
    let select = move |id: String| {
        focused.set(Some(id.clone()));
        let u = url.get_untracked();
        let (run, trace) = (
            u.run_id.clone().unwrap_or_default(),
            u.trace_id.clone().unwrap_or_default(),
        );
        go_to.run(u.with_selection(&run, &trace, Some(&id)));
    };
    let more = {
        let (run, trace_id) = (run.clone(), trace_id.clone());
        move |parent: String| fetch_children(tree, run.clone(), trace_id.clone(), parent)
    };
    let more = StoredValue::new(more);

    let on_key = move |ev: leptos::ev::KeyboardEvent| {
        let ids: Vec<(String, usize)> = rows.with_untracked(|r| {
            r.iter()
                .filter_map(|row| match row {
                    Row::Node { id, depth } => Some((id.clone(), *depth)),
                    _ => None,
                })
                .collect()
        });
        if ids.is_empty() {
            return;
        }
        let current = focused
            .get_untracked()
            .and_then(|f| ids.iter().position(|(id, _)| *id == f));
        let key = ev.key();
        let next = match key.as_str() {
            "ArrowDown" => Some(current.map_or(0, |i| (i + 1).min(ids.len() - 1))),
            "ArrowUp" => Some(current.map_or(0, |i| i.saturating_sub(1))),
            "Home" => Some(0),
            "End" => Some(ids.len() - 1),
            "ArrowRight" | "ArrowLeft" | "Enter" | " " => {
                let Some(i) = current else { return };
                let id = ids[i].0.clone();
                let (has_children, open) = tree.with_untracked(|t| {
                    (
                        t.node(&id).is_some_and(|n| n.child_count > 0),
                        t.expanded.contains(&id),
                    )
                });
                match key.as_str() {
                    "ArrowRight" if has_children && !open => toggle.with_value(|f| f(id)),
                    "ArrowRight" if open => {
                        return focus_row(focused, ids.get(i + 1).map(|x| x.0.clone()))
                    }
                    "ArrowLeft" if open => toggle.with_value(|f| f(id)),
                    "ArrowLeft" => {
                        let parent = tree.with_untracked(|t| t.parent_of(&id));
                        return focus_row(focused, parent);
                    }
                    "Enter" | " " => select(id),
                    _ => {}
                }
                ev.prevent_default();
                None
            }
            _ => return,
        };
        ev.prevent_default();
        if let Some(i) = next {
            focus_row(focused, Some(ids[i].0.clone()));
            // Keep the focused row in view.
            let top = i as f64 * ROW;
            if let Some(el) = scroller.get_untracked() {
                let view_top = f64::from(el.scroll_top());
                let view_h = f64::from(el.client_height());
                if top < view_top + ROW {
                    el.set_scroll_top((top - ROW).max(0.0) as i32);
                } else if top + 2.0 * ROW > view_top + view_h {
                    el.set_scroll_top((top + 2.0 * ROW - view_h) as i32);
                }
            }
        }
    };

    // A row's key carries its node, so a refresh redraws exactly the rows that changed.
    let window = move || {
        let all = rows.get();
        let first = ((scroll_top.get() / ROW) as usize).saturating_sub(OVERSCAN);
        let count = (height.get() / ROW) as usize + 2 * OVERSCAN;
        tree.with(|t| {
            all.into_iter()
                .enumerate()
                .skip(first)
                .take(count)
                .map(|(i, row)| {
                    let node = match &row {
                        Row::Node { id, .. } => t.node(id).cloned(),
                        _ => None,
                    };
                    (i, row, node)
                })
                .collect::<Vec<_>>()
        })
    };
    let name = seed.trace.name.clone();
    view! {
        <div class="pane-head">
            <strong class="grow" title=name.clone()>{name.clone()}</strong>
            {move || (trace.with(|t| t.status) == SpanStatus::Running)
                .then(|| view! { <span class="live" title="refreshing while the trace runs">"live"</span> })}
            <span class="muted">{move || format!("{} spans", trace.with(|t| t.span_count))}</span>
            <button type="button" class="copy" on:click=move |_| copy_location()>"Copy link"</button>
        </div>
        <div
            class="tree-scroll"
            node_ref=scroller
            role="tree"
            aria-label=format!("Spans of {name}")
            tabindex="0"
            aria-activedescendant=move || focused.get().map(|f| format!("node-{f}")).unwrap_or_default()
            style="height: calc(100% - 42px); overflow: auto;"
            on:scroll=move |ev| {
                let el = event_target::<leptos::web_sys::Element>(&ev);
                scroll_top.set(f64::from(el.scroll_top()));
                height.set(f64::from(el.client_height()).max(200.0));
            }
            on:keydown=on_key
        >
            <div style=move || format!("position: relative; height: {}px;", rows.with(Vec::len) as f64 * ROW)>
                <For each=window key=|item| item.clone() let:item>
                    {
                        let (index, row, node) = item;
                        let top = index as f64 * ROW;
                        match row {
                            Row::Node { depth, .. } => {
                                node.map(|node| view! {
                                    <NodeRow node depth top axis tree selected focused
                                        on_toggle=Callback::new(move |id: String| toggle.with_value(|f| f(id)))
                                        on_select=Callback::new(select)/>
                                }.into_any())
                                .unwrap_or_else(|| ().into_any())
                            }
                            Row::More { parent, depth, remaining } => view! {
                                <div role="treeitem" {..custom_attribute("aria-level", (depth + 1).to_string())} class="more-row"
                                    style=format!("position: absolute; top: {top}px; left: 0; right: 0; padding-left: {}px", depth * INDENT + 24)>
                                    <button type="button" class="load-more" on:click=move |_| more.with_value(|f| f(parent.clone()))>
                                        {format!("load {} more", remaining.min(200))}
                                    </button>
                                </div>
                            }.into_any(),
                            Row::Loading { depth } => view! {
                                <div role="treeitem" {..custom_attribute("aria-level", (depth + 1).to_string())} aria-busy="true"
                                    style=format!("position: absolute; top: {top}px; left: 0; right: 0; padding-left: {}px", depth * INDENT + 24)>
                                    <span class="spinner"></span>" loading…"
                                </div>
                            }.into_any(),
                        }
                    }
                </For>
            </div>
        </div>
    }
}

/// While the trace runs, reads it again every few seconds: its summary and the
/// children of every open node, merged in place so the reader's selection, open
/// nodes and scroll position stay where they were. Stops once the trace has ended.
fn live_refresh(
    tree: RwSignal<Tree>,
    trace: RwSignal<TraceSummary>,
    selected: Memo<Option<String>>,
    refreshed: RwSignal<u32>,
) {
    Effect::new(move |_| {
        if trace.with_untracked(|t| t.status) != SpanStatus::Running {
            return;
        }
        let busy = StoredValue::new(false);
        let handle = set_interval_with_handle(
            move || {
                if busy.get_value() || trace.with_untracked(|t| t.status) != SpanStatus::Running {
                    return;
                }
                busy.set_value(true);
                leptos::task::spawn_local(async move {
                    refresh_once(tree, trace, selected, refreshed).await;
                    busy.set_value(false);
                });
            },
            std::time::Duration::from_millis(REFRESH_MS),
        );
        if let Ok(handle) = handle {
            on_cleanup(move || handle.clear());
        }
    });
}

async fn refresh_once(
    tree: RwSignal<Tree>,
    trace: RwSignal<TraceSummary>,
    selected: Memo<Option<String>>,
    refreshed: RwSignal<u32>,
) {
    let (run, trace_id) = trace.with_untracked(|t| (t.run_id.clone(), t.trace_id.clone()));
    let Ok(summary) = api::trace(run.clone(), trace_id.clone()).await else {
        return;
    };
    let chosen = selected.get_untracked();
    let before = chosen
        .as_ref()
        .and_then(|id| tree.with_untracked(|t| t.node(id).cloned()));
    let parents = tree.try_update(Tree::visible_parents).unwrap_or_default();
    for (parent, loaded) in parents {
        let limit = loaded.clamp(api::SPAN_PAGE, api::SPAN_PAGE_MAX);
        let arg = (!parent.is_empty()).then(|| parent.clone());
        if let Ok(page) = api::span_page(run.clone(), trace_id.clone(), arg, None, limit).await {
            tree.update(|t| t.refresh(&parent, page.spans, page.next_cursor));
        }
    }
    let after = chosen
        .as_ref()
        .and_then(|id| tree.with_untracked(|t| t.node(id).cloned()));
    if before != after {
        refreshed.update(|n| *n += 1);
    }
    trace.set(summary);
}

fn focus_row(focused: RwSignal<Option<String>>, id: Option<String>) {
    if id.is_some() {
        focused.set(id);
    }
}

fn copy_location() {
    #[cfg(all(feature = "hydrate", not(feature = "ssr")))]
    if let Some(href) = leptos::web_sys::window().and_then(|w| w.location().href().ok()) {
        super::copy_text(&href);
    }
}

#[component]
fn NodeRow(
    node: SpanNode,
    depth: usize,
    top: f64,
    axis: Memo<(i64, i64)>,
    tree: RwSignal<Tree>,
    selected: Memo<Option<String>>,
    focused: RwSignal<Option<String>>,
    on_toggle: Callback<String>,
    on_select: Callback<String>,
) -> impl IntoView {
    let id = node.span_id.clone();
    let has_children = node.child_count > 0;
    let expanded = {
        let id = id.clone();
        Memo::new(move |_| tree.with(|t| t.expanded.contains(&id)))
    };
    let is_selected = {
        let id = id.clone();
        move || selected.get().as_deref() == Some(id.as_str())
    };
    let is_focused = {
        let id = id.clone();
        move || focused.get().as_deref() == Some(id.as_str())
    };
    let (start, end) = (node.start_us, node.end_us);
    let bar = move || {
        let (t0, t1) = axis.get();
        let span = (t1 - t0).max(1) as f64;
        let left = ((start - t0) as f64 / span * 100.0).clamp(0.0, 100.0);
        let width = ((end.unwrap_or(t1) - start) as f64 / span * 100.0).clamp(0.0, 100.0 - left);
        format!("left: {left:.2}%; width: {width:.2}%")
    };
    let status = node.status;
    let duration = match node.duration_us {
        Some(d) => format::duration(d),
        None if status == SpanStatus::Running => "running".into(),
        None => "—".into(),
    };
    let toggle_id = id.clone();
    let select_id = id.clone();
    view! {
        <div
            role="treeitem"
            id=format!("node-{id}")
            {..custom_attribute("aria-level", (depth + 1).to_string())}
            aria-expanded=move || has_children.then(|| expanded.get().to_string())
            aria-selected=move || is_selected().to_string()
            class:focused=is_focused
            style=format!("position: absolute; top: {top}px; left: 0; right: 0; padding-left: {}px", depth * INDENT + 4)
            on:click=move |_| on_select.run(select_id.clone())
        >
            {if has_children {
                view! {
                    <button type="button" class="toggle" tabindex="-1" aria-hidden="true"
                        on:click=move |ev| { ev.stop_propagation(); on_toggle.run(toggle_id.clone()); }>
                        {move || if expanded.get() { "▾" } else { "▸" }}
                    </button>
                }.into_any()
            } else {
                view! { <span class="toggle"></span> }.into_any()
            }}
            <span class=format!("dot status-{}", status.as_str()) title=status.label()></span>
            <span class="kind">{node.kind.as_str()}</span>
            <span class="node-name" title=node.name.clone()>{node.name.clone()}</span>
            {node.orphan.then(|| view! { <span class="note" title="its parent has not arrived">"orphan"</span> })}
            {(node.error_count > 0).then(|| view! { <span class="below">{format!("{} failed below", node.error_count)}</span> })}
            {has_children.then(|| view! { <span class="children" title="children">{format!("{} children", node.child_count)}</span> })}
            <span class="bar-track" aria-hidden="true">
                <span class=format!("bar status-{}", status.as_str()) style=bar></span>
            </span>
            <span class="dur">{duration}</span>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::SpanKind;

    fn node(id: &str, children: i64) -> SpanNode {
        SpanNode {
            span_id: id.into(),
            parent_span_id: None,
            name: id.into(),
            kind: SpanKind::Custom,
            status: SpanStatus::Ok,
            start_us: 0,
            end_us: Some(1),
            duration_us: Some(1),
            step: None,
            rank: None,
            child_count: children,
            error_count: 0,
            token_count: None,
            orphan: false,
        }
    }

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
        assert_eq!(rows.len(), 4);
        assert_eq!(
            rows[3],
            Row::More {
                parent: "root".into(),
                depth: 1,
                remaining: 498
            }
        );
        assert_eq!(tree.parent_of("b").as_deref(), Some("root"));
        assert_eq!(tree.parent_of("root"), None);
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
        assert_eq!(
            tree.cursors.get("root").cloned().flatten().as_deref(),
            Some("after-d")
        );

        // Children of a collapsed node are forgotten, to be read again on opening.
        tree.add_page("a", vec![node("a1", 0)], None);
        let mut parents = tree.visible_parents();
        parents.sort();
        assert_eq!(parents, [(String::new(), 1), ("root".to_string(), 4)]);
        assert!(!tree.children.contains_key("a"));
    }
}
