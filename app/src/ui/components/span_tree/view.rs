//! The span tree's pane: it wires the model, the loaders, the keyboard and the
//! viewport together and draws the slice of rows in view.

use leptos::prelude::*;
use treeline_wire::{dropped_spans, SpanStatus, TraceSummary};

use super::keys::{self, Key, Nav, Step};
use super::live;
use super::load::Loader;
use super::model::{Row, Seed, Tree};
use super::rows::{self, RowCtx};
use super::slots::{self, Slots};
use super::viewport::Viewport;
use super::window::{self, ROW};
use crate::ui::api::ApiError;
use crate::ui::components::CopyButton;
use crate::ui::format::{self, DROPPED_TITLE};
use crate::ui::url::WorkspaceUrl;

#[component]
pub(crate) fn SpanTree(
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
    let loader = Loader::new(tree, seed.run_id.clone(), seed.trace.trace_id.clone());
    let trace = RwSignal::new(seed.trace.clone());
    let axis = time_axis(trace);
    let rows = Memo::new(move |_| tree.with(Tree::rows));
    // This tree's selection only: while the next trace's tree loads, its span is not
    // this trace's (following it here asked the server for a span it does not have).
    let own = (seed.run_id.clone(), seed.trace.trace_id.clone());
    let selected = Memo::new(move |_| {
        url.with(|u| {
            let here = u.run_id.as_deref() == Some(own.0.as_str())
                && u.trace_id.as_deref() == Some(own.1.as_str());
            u.span_id.clone().filter(|_| here)
        })
    });
    live::refresh_while_running(tree, trace, selected, refreshed);
    loader.follow(selected);
    let focused = RwSignal::new(selected.get_untracked());
    // Open on a deep-linked row.
    let opening = selected.with_untracked(|s| s.as_deref().and_then(|s| row_of(rows, s)));
    let viewport = Viewport::new(window::opening_scroll(opening));
    let slice = viewport.slice(move || rows.with(Vec::len));
    read_ahead(loader, rows, slice);

    let select = Callback::new(move |id: String| {
        focused.set(Some(id.clone()));
        go_to.run(WorkspaceUrl {
            span_id: Some(id),
            ..url.get_untracked()
        });
    });
    let toggle = Callback::new(move |id: String| loader.toggle(id));
    let ctx = RowCtx {
        axis,
        tree,
        selected,
        focused,
        on_toggle: toggle,
        on_select: select,
        on_more: Callback::new(move |parent: String| loader.more(parent)),
        on_earlier: Callback::new(move |parent: String| loader.earlier(parent)),
        on_jump: Callback::new(move |(parent, lens)| loader.jump(parent, lens)),
    };
    let on_key = move |ev: leptos::ev::KeyboardEvent| {
        let key = Key::from_dom(&ev.key());
        let Some(step) = key.and_then(|key| step_for(key, rows, tree, focused)) else {
            return;
        };
        ev.prevent_default();
        match step {
            Step::Focus { id, row } => {
                focused.set(Some(id));
                viewport.keep_in_view(row);
            }
            Step::Expand(id) | Step::Collapse(id) => toggle.run(id),
            Step::Select(id) => select.run(id),
            Step::Stay => {}
        }
    };
    // Row elements are kept and reused: row i is drawn by element i % slots, so a
    // scroll sets the text of the rows that came into view instead of building them.
    let slots = viewport.slots();
    let kept = Slots::new();
    Effect::new(move |_| {
        let (range, n) = (slice.get(), slots.get());
        rows.with(|rows| tree.with(|t| kept.update(t, rows, range, n)));
    });
    let slot = move |slot: usize| {
        let item = kept.item(slot, || {
            let (range, n) = (slice.get_untracked(), slots.get_untracked());
            rows.with_untracked(|rows| {
                tree.with_untracked(|t| {
                    slots::shown_by(t, rows, range, n, slot)
                        .map(|(i, row, node)| (i, row.clone(), node.cloned()))
                })
            })
        });
        rows::slot(item, ctx)
    };

    let name = seed.trace.name;
    view! {
        <PaneHead name=name.clone() trace/>
        <div
            class="tree-scroll"
            node_ref=viewport.el
            role="tree"
            aria-label=format!("Spans of {name}")
            tabindex="0"
            aria-activedescendant=move || active_row(focused, rows, slice)
            style="height: calc(100% - 42px); overflow: auto;"
            on:scroll=move |ev| viewport.on_scroll(&ev)
            on:mouseover=|ev| name_as_title(&ev)
            on:keydown=on_key
            on:focus=move |_| {
                // Keys act on the active row: with none yet, the first one is.
                if focused.get_untracked().is_none() {
                    let first = rows.with_untracked(|r| r.iter().find_map(|row| match row {
                        Row::Node { id, .. } => Some(id.clone()),
                        _ => None,
                    }));
                    focused.set(first);
                }
            }
        >
            <div style=move || format!("position: relative; height: {}px;", rows.with(Vec::len) as f64 * ROW)>
                <For each=move || 0..slots.get() key=|slot| *slot children=slot/>
            </div>
        </div>
    }
}

/// The trace's name, whether it is live, its size, and a link to this view.
#[component]
fn PaneHead(name: String, trace: RwSignal<TraceSummary>) -> impl IntoView {
    view! {
        <div class="pane-head">
            <strong class="grow" title=name.clone()>{name.clone()}</strong>
            {move || (trace.with(|t| t.status) == SpanStatus::Running)
                .then(|| view! { <span class="live" title="refreshing while the trace runs">"live"</span> })}
            <span class="muted">{move || format::spans(trace.with(|t| t.span_count))}</span>
            {move || trace.with(|t| dropped_spans(&t.attributes)).map(|n| view! {
                <span class="bad" title=DROPPED_TITLE>{format::dropped(n)}</span>
            })}
            <CopyButton text=Callback::new(move |()| location()) caption="Copy link"/>
        </div>
    }
}

/// A span's name, which a narrow pane cuts short, as its tooltip: set when the
/// pointer comes over it, rather than written to every row a scroll moves.
fn name_as_title(ev: &leptos::ev::MouseEvent) {
    let el = event_target::<leptos::web_sys::Element>(ev);
    if el.class_list().contains("node-name") {
        if let Some(name) = el.text_content() {
            let _ = el.set_attribute("title", &name);
        }
    }
}

/// Reads the next page of a node's children once its "load more" row comes within
/// [`window::READ_AHEAD`] rows of the view, so scrolling through a large node never
/// waits for a click. (An effect: it runs in the browser only.)
fn read_ahead(loader: Loader, rows: Memo<Vec<Row>>, slice: Memo<std::ops::Range<usize>>) {
    Effect::new(move |_| {
        let range = slice.get();
        let near: Vec<String> = rows.with(|rows| {
            let end = range.end.saturating_add(window::READ_AHEAD).min(rows.len());
            rows.get(range.start.min(end)..end)
                .unwrap_or_default()
                .iter()
                .filter_map(|row| match row {
                    Row::More { parent, .. } => Some(parent.clone()),
                    _ => None,
                })
                .collect()
        });
        for parent in near {
            loader.read_ahead(parent);
        }
    });
}

/// What `key` does to the tree as it is on screen now.
fn step_for(
    key: Key,
    rows: Memo<Vec<Row>>,
    tree: RwSignal<Tree>,
    focused: RwSignal<Option<String>>,
) -> Option<Step> {
    rows.with_untracked(|rows| {
        tree.with_untracked(|tree| {
            let focused = focused.read_untracked();
            let focused = focused.as_deref();
            keys::reduce(
                key,
                &Nav {
                    rows,
                    tree,
                    focused,
                },
            )
        })
    })
}

/// The bars' time axis; a running trace's ends now.
fn time_axis(trace: RwSignal<TraceSummary>) -> Memo<(i64, i64)> {
    Memo::new(move |_| {
        trace.with(|t| {
            let t0 = t.start_us.unwrap_or(0);
            (t0, t.end_us.unwrap_or_else(format::now_us).max(t0 + 1))
        })
    })
}

/// The id of the focused row's element while it is drawn; none otherwise (nothing
/// focused, a span not in the tree, or a row scrolled out of the drawn slice), since
/// `aria-activedescendant` must name an element on the page.
fn active_row(
    focused: RwSignal<Option<String>>,
    rows: Memo<Vec<Row>>,
    slice: Memo<std::ops::Range<usize>>,
) -> Option<String> {
    let focused = focused.get()?;
    let range = slice.get();
    let drawn = rows.with(|rows| {
        rows.get(range).is_some_and(|drawn| {
            drawn
                .iter()
                .any(|row| matches!(row, Row::Node { id, .. } if *id == focused))
        })
    });
    drawn.then(|| format!("node-{focused}"))
}

/// Where span `id` is among the rows.
fn row_of(rows: Memo<Vec<Row>>, id: &str) -> Option<usize> {
    rows.with_untracked(|r| {
        r.iter()
            .position(|row| matches!(row, Row::Node { id: x, .. } if x == id))
    })
}

/// The page's address, this view's link (in the browser; none on the server).
fn location() -> Option<String> {
    #[cfg(all(feature = "hydrate", not(feature = "ssr")))]
    return leptos::web_sys::window().and_then(|w| w.location().href().ok());
    #[cfg(not(all(feature = "hydrate", not(feature = "ssr"))))]
    None
}
