//! The tree's rows as drawn: a span, "load more", a node whose children are on
//! their way, and a large node's jump bar and "load earlier". Each sits at its index
//! (see `window`).

use leptos::prelude::*;
use leptos::tachys::html::attribute::custom::custom_attribute;

use super::model::{Drawn, Lens, Row, Tree};
use super::node_row::NodeRow;
use super::window::place;
use crate::ui::format;

/// Children per read, as the "load more" and "load earlier" rows say.
const PAGE: i64 = crate::ui::api::SPAN_PAGE as i64;

/// What every row reads and calls.
#[derive(Clone, Copy)]
pub(super) struct RowCtx {
    /// The bars' time axis.
    pub(super) axis: Memo<(i64, i64)>,
    pub(super) tree: RwSignal<Tree>,
    pub(super) selected: Memo<Option<String>>,
    pub(super) focused: RwSignal<Option<String>>,
    pub(super) on_toggle: Callback<String>,
    pub(super) on_select: Callback<String>,
    pub(super) on_more: Callback<String>,
    pub(super) on_earlier: Callback<String>,
    pub(super) on_jump: Callback<(String, Lens)>,
}

/// One kept row element: it shows whichever row of the slice falls to it. A span
/// row stays the same elements as the spans it shows change (a scroll sets their
/// text and attributes); the rarer rows are drawn afresh.
pub(super) fn slot(item: RwSignal<Option<Drawn>>, ctx: RowCtx) -> impl IntoView {
    let is_span = Memo::new(move |_| {
        item.with(|d| {
            d.as_ref()
                .map(|(_, row, node)| matches!(row, Row::Node { .. }) && node.is_some())
        })
    });
    // Another row is keyed whole, so that a changed one is drawn anew (rebuilding a
    // jump bar in place kept its old text).
    let other = move || {
        view! { <For each=move || item.get() key=|drawn| drawn.clone() children=move |drawn| draw(drawn, ctx)/> }
    };
    move || match is_span.get() {
        Some(true) => view! { <NodeRow item ctx/> }.into_any(),
        Some(false) => other().into_any(),
        None => ().into_any(),
    }
}

/// Draws one row other than a span's.
fn draw((index, row, node): Drawn, ctx: RowCtx) -> AnyView {
    match row {
        Row::Node { .. } => ().into_any(),
        Row::More {
            parent,
            depth,
            remaining,
        } => view! { <MoreRow parent depth remaining index on_more=ctx.on_more/> }.into_any(),
        Row::Loading { depth } => view! { <LoadingRow depth index/> }.into_any(),
        Row::Jump {
            parent,
            depth,
            lens,
            loaded,
        } => {
            let total = node.map_or(0, |n| n.child_count);
            let on_jump = ctx.on_jump;
            view! { <JumpRow parent depth index lens loaded total on_jump/> }.into_any()
        }
        Row::Earlier {
            parent,
            depth,
            before,
        } => view! { <EarlierRow parent depth before index on_earlier=ctx.on_earlier/> }.into_any(),
    }
}

/// "load more" under the last loaded child of `parent`.
#[component]
fn MoreRow(
    parent: String,
    depth: usize,
    remaining: Option<i64>,
    index: usize,
    on_more: Callback<String>,
) -> impl IntoView {
    let label = match remaining {
        Some(n) => format!("load {} more", n.min(PAGE)),
        None => "load more matches".to_string(),
    };
    view! {
        <div role="treeitem" {..custom_attribute("aria-level", (depth + 1).to_string())} class="more-row"
            style=place(index, depth, 24)>
            <button type="button" class="load-more" on:click=move |_| on_more.run(parent.clone())>
                {label}
            </button>
        </div>
    }
}

/// "load earlier" above children loaded from a place past the first.
#[component]
fn EarlierRow(
    parent: String,
    depth: usize,
    before: i64,
    index: usize,
    on_earlier: Callback<String>,
) -> impl IntoView {
    view! {
        <div role="treeitem" {..custom_attribute("aria-level", (depth + 1).to_string())} class="more-row"
            style=place(index, depth, 24)>
            <button type="button" class="load-more" on:click=move |_| on_earlier.run(parent.clone())>
                {format!("load {} earlier ({} before)", before.min(PAGE), format::count(before))}
            </button>
        </div>
    }
}

/// A large node's jump bar: which of its children are loaded, "go to child N" and
/// "find by name" (Enter in either; an empty search shows them all again).
#[component]
fn JumpRow(
    parent: String,
    depth: usize,
    index: usize,
    lens: Lens,
    loaded: usize,
    total: i64,
    on_jump: Callback<(String, Lens)>,
) -> impl IntoView {
    let shown = match &lens.name {
        Some(name) => format!("{} matching “{name}”", format::count(loaded as i64)),
        None if loaded == 0 => format!("none of {}", format::count(total)),
        None => format!(
            "{}–{} of {}",
            format::count(lens.from + 1),
            format::count(lens.from + loaded as i64),
            format::count(total)
        ),
    };
    let searching = lens.name.is_some();
    let (go_parent, find_parent, all_parent) = (parent.clone(), parent.clone(), parent);
    // Keys typed here are the field's, not the tree's.
    let on_go = move |ev: leptos::ev::KeyboardEvent| {
        ev.stop_propagation();
        if ev.key() != "Enter" {
            return;
        }
        if let Ok(n) = event_target_value(&ev).trim().parse::<i64>() {
            let from = n.clamp(1, total.max(1)) - 1;
            on_jump.run((go_parent.clone(), Lens { from, name: None }));
        }
    };
    let on_find = move |ev: leptos::ev::KeyboardEvent| {
        ev.stop_propagation();
        if ev.key() != "Enter" {
            return;
        }
        let text = event_target_value(&ev).trim().to_string();
        let name = (!text.is_empty()).then_some(text);
        on_jump.run((find_parent.clone(), Lens { from: 0, name }));
    };
    view! {
        <div role="treeitem" {..custom_attribute("aria-level", (depth + 1).to_string())} class="jump-row"
            style=place(index, depth, 24) on:click=|ev| ev.stop_propagation()>
            <span class="muted">{shown}</span>
            <input type="number" class="jump-to" min="1" max=total.to_string() placeholder="go to #"
                aria-label="Go to child number" title="Enter a child's number, then press Enter"
                on:keydown=on_go/>
            <input type="search" class="jump-find" placeholder="find by name" aria-label="Find children by name"
                prop:value=lens.name.clone().unwrap_or_default() on:keydown=on_find/>
            {searching.then(|| view! {
                <button type="button" class="load-more"
                    on:click=move |_| on_jump.run((all_parent.clone(), Lens::default()))>"show all"</button>
            })}
        </div>
    }
}

#[component]
fn LoadingRow(depth: usize, index: usize) -> impl IntoView {
    view! {
        <div role="treeitem" {..custom_attribute("aria-level", (depth + 1).to_string())} aria-busy="true"
            style=place(index, depth, 24)>
            <span class="spinner"></span>" loading…"
        </div>
    }
}
