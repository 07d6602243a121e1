//! A span's row. Its element is kept while the tree scrolls and shows whichever
//! span falls to it: drawn once with what it shows first (on the server too), then
//! one effect writes what changed. A binding a field (about 25 reactive nodes a row)
//! spent most of a scroll's frame checking and rerunning them.

use leptos::html;
use leptos::prelude::*;
use leptos::tachys::html::attribute::custom::custom_attribute;
use treeline_wire::{SpanNode, SpanStatus};

use super::model::{Drawn, Row};
use super::rows::RowCtx;
use super::window::place;
use crate::ui::format;

/// Everything a span's row shows, as the DOM takes it.
#[derive(Clone, Debug, Default, PartialEq)]
struct Shown {
    /// Only the selected and the focused rows' elements carry their span's id (for
    /// `aria-activedescendant` and links): one write fewer a row a scroll moves.
    dom_id: Option<String>,
    level: String,
    /// `aria-expanded`, for a node with children only.
    expanded: Option<&'static str>,
    selected: bool,
    focused: bool,
    style: String,
    toggle: &'static str,
    dot_class: String,
    status: &'static str,
    kind: &'static str,
    name: String,
    orphan: bool,
    below: Option<String>,
    children: Option<String>,
    bar_class: String,
    bar_style: String,
    duration: String,
}

/// What the row's state says to show.
struct State {
    expanded: bool,
    selected: bool,
    focused: bool,
    axis: (i64, i64),
}

impl Shown {
    fn of(drawn: &Option<Drawn>, state: &State) -> Option<Shown> {
        let (index, Row::Node { depth, .. }, Some(n)) = drawn.as_ref()? else {
            return None;
        };
        let has_children = n.child_count > 0;
        let status = n.status.as_str();
        Some(Shown {
            dom_id: (state.selected || state.focused).then(|| format!("node-{}", n.span_id)),
            level: (depth + 1).to_string(),
            expanded: has_children.then_some(if state.expanded { "true" } else { "false" }),
            selected: state.selected,
            focused: state.focused,
            style: place(*index, *depth, 4),
            toggle: match (has_children, state.expanded) {
                (false, _) => "",
                (true, true) => "▾",
                (true, false) => "▸",
            },
            dot_class: format!("dot status-{status}"),
            status: n.status.label(),
            kind: n.kind.as_str(),
            name: n.name.clone(),
            orphan: n.orphan,
            below: (n.error_count > 0).then(|| format!("{} failed below", n.error_count)),
            children: has_children.then(|| format::children(n.child_count)),
            bar_class: format!("bar status-{status}"),
            bar_style: bar(n, state.axis),
            duration: duration(n),
        })
    }
}

/// The timing bar's place on the trace's time axis.
fn bar(n: &SpanNode, (t0, t1): (i64, i64)) -> String {
    let span = (t1 - t0).max(1) as f64;
    let left = ((n.start_us - t0) as f64 / span * 100.0).clamp(0.0, 100.0);
    let width =
        ((n.end_us.unwrap_or(t1) - n.start_us) as f64 / span * 100.0).clamp(0.0, 100.0 - left);
    format!("left: {left:.2}%; width: {width:.2}%")
}

fn duration(n: &SpanNode) -> String {
    match n.duration_us {
        Some(d) => format::duration(d),
        None if n.status == SpanStatus::Running => "running".into(),
        None => "—".into(),
    }
}

/// The span id of a drawn row.
fn span_id(drawn: &Option<Drawn>) -> Option<&str> {
    drawn.as_ref()?.2.as_ref().map(|n| n.span_id.as_str())
}

/// The row's elements that change, for the effect that writes them.
#[derive(Clone, Copy)]
struct Parts {
    row: NodeRef<html::Div>,
    toggle: NodeRef<html::Button>,
    dot: NodeRef<html::Span>,
    kind: NodeRef<html::Span>,
    name: NodeRef<html::Span>,
    orphan: NodeRef<html::Span>,
    below: NodeRef<html::Span>,
    children: NodeRef<html::Span>,
    bar: NodeRef<html::Span>,
    duration: NodeRef<html::Span>,
}

impl Parts {
    fn new() -> Self {
        Parts {
            row: NodeRef::new(),
            toggle: NodeRef::new(),
            dot: NodeRef::new(),
            kind: NodeRef::new(),
            name: NodeRef::new(),
            orphan: NodeRef::new(),
            below: NodeRef::new(),
            children: NodeRef::new(),
            bar: NodeRef::new(),
            duration: NodeRef::new(),
        }
    }

    /// Writes what differs between `old` and `new` (all of it with no `old`).
    fn write(self, old: Option<&Shown>, new: &Shown) {
        let changed = |f: fn(&Shown) -> &str| old.is_none_or(|o| f(o) != f(new));
        let (Some(row), Some(toggle), Some(dot), Some(kind), Some(name)) = (
            self.row.get_untracked(),
            self.toggle.get_untracked(),
            self.dot.get_untracked(),
            self.kind.get_untracked(),
            self.name.get_untracked(),
        ) else {
            return;
        };
        let (Some(orphan), Some(below), Some(children), Some(bar), Some(duration)) = (
            self.orphan.get_untracked(),
            self.below.get_untracked(),
            self.children.get_untracked(),
            self.bar.get_untracked(),
            self.duration.get_untracked(),
        ) else {
            return;
        };
        // A failed write to an element this row made cannot be acted on: the next
        // change writes it again.
        let set = |el: &leptos::web_sys::Element, key: &str, value: &str| {
            let _ = el.set_attribute(key, value);
        };
        let flag = |el: &leptos::web_sys::Element, key: &str, on: bool| {
            let _ = if on {
                el.set_attribute(key, "")
            } else {
                el.remove_attribute(key)
            };
        };
        if old.is_none_or(|o| o.dom_id != new.dom_id) {
            match &new.dom_id {
                Some(id) => row.set_id(id),
                None => {
                    let _ = row.remove_attribute("id");
                }
            }
        }
        if changed(|s| &s.level) {
            set(&row, "aria-level", &new.level);
        }
        if changed(|s| s.expanded.unwrap_or("")) {
            match new.expanded {
                Some(value) => set(&row, "aria-expanded", value),
                None => {
                    let _ = row.remove_attribute("aria-expanded");
                }
            }
        }
        if old.is_none_or(|o| o.selected != new.selected) {
            set(
                &row,
                "aria-selected",
                if new.selected { "true" } else { "false" },
            );
        }
        if old.is_none_or(|o| o.focused != new.focused) {
            let _ = row.class_list().toggle_with_force("focused", new.focused);
        }
        if changed(|s| &s.style) {
            set(&row, "style", &new.style);
        }
        if changed(|s| s.toggle) {
            toggle.set_text_content(Some(new.toggle));
        }
        if changed(|s| &s.dot_class) {
            set(&dot, "class", &new.dot_class);
        }
        if changed(|s| s.status) {
            set(&dot, "title", new.status);
        }
        if changed(|s| s.kind) {
            kind.set_text_content(Some(new.kind));
        }
        if changed(|s| &s.name) {
            name.set_text_content(Some(&new.name));
        }
        if old.is_none_or(|o| o.orphan != new.orphan) {
            flag(&orphan, "hidden", !new.orphan);
        }
        for (el, old_text, text) in [
            (&below, old.map(|o| &o.below), &new.below),
            (&children, old.map(|o| &o.children), &new.children),
        ] {
            if old_text != Some(text) {
                flag(el, "hidden", text.is_none());
                el.set_text_content(text.as_deref());
            }
        }
        if changed(|s| &s.bar_class) {
            set(&bar, "class", &new.bar_class);
        }
        if changed(|s| &s.bar_style) {
            set(&bar, "style", &new.bar_style);
        }
        if changed(|s| &s.duration) {
            duration.set_text_content(Some(&new.duration));
        }
    }
}

/// A span's row, following the span its element shows (`item`).
#[component]
pub(super) fn NodeRow(item: RwSignal<Option<Drawn>>, ctx: RowCtx) -> impl IntoView {
    let RowCtx {
        axis,
        tree,
        selected,
        focused,
        on_toggle,
        on_select,
        ..
    } = ctx;
    // A memo: a page read changes the tree, and wakes only the rows whose span
    // opened or shut. A new selection or focus wakes every row's effect, which
    // writes only what changed.
    let expanded = Memo::new(move |_| {
        item.with(|d| span_id(d).is_some_and(|id| tree.with(|t| t.is_expanded(id))))
    });
    let state = move |id: Option<&str>| {
        let is = |which: Option<&str>| which.is_some() && which == id;
        State {
            expanded: expanded.get(),
            selected: selected.with(|s| is(s.as_deref())),
            focused: focused.with(|f| is(f.as_deref())),
            axis: axis.get(),
        }
    };
    let first = untrack(|| item.with(|d| Shown::of(d, &state(span_id(d))))).unwrap_or_default();
    let parts = Parts::new();
    // In the browser only: the server draws the first span, and hydration keeps it.
    Effect::new(move |old: Option<Option<Shown>>| {
        let new = item.with(|d| Shown::of(d, &state(span_id(d))))?;
        // Not yet mounted: nothing written, so the next run writes it all.
        parts.row.get()?;
        parts.write(old.flatten().as_ref(), &new);
        Some(new)
    });
    let id = move || item.with_untracked(|d| span_id(d).map(str::to_string));
    let has_children = move || {
        item.with_untracked(|d| {
            d.as_ref()
                .and_then(|d| d.2.as_ref())
                .is_some_and(|n| n.child_count > 0)
        })
    };
    // Empty text is left out: hydration finds no text node for it.
    let name = (!first.name.is_empty()).then(|| first.name.clone());
    let (no_below, no_children) = (first.below.is_none(), first.children.is_none());
    view! {
        <div
            role="treeitem"
            node_ref=parts.row
            id=first.dom_id
            {..custom_attribute("aria-level", first.level)}
            aria-expanded=first.expanded
            aria-selected=if first.selected { "true" } else { "false" }
            class:focused=first.focused
            style=first.style
            on:click=move |_| {
                if let Some(id) = id() {
                    on_select.run(id);
                }
            }
        >
            <button type="button" class="toggle" tabindex="-1" aria-hidden="true" node_ref=parts.toggle
                on:click=move |ev| {
                    // A leaf's toggle is only its indent: a click there selects the row.
                    if let Some(id) = id().filter(|_| has_children()) {
                        ev.stop_propagation();
                        on_toggle.run(id);
                    }
                }>
                {(!first.toggle.is_empty()).then_some(first.toggle)}
            </button>
            <span class=first.dot_class title=first.status node_ref=parts.dot></span>
            <span class="kind" node_ref=parts.kind>{first.kind}</span>
            <span class="node-name" node_ref=parts.name>{name}</span>
            <span class="note" title="its parent has not arrived" hidden=!first.orphan node_ref=parts.orphan>"orphan"</span>
            <span class="below" hidden=no_below node_ref=parts.below>{first.below}</span>
            <span class="children" hidden=no_children node_ref=parts.children>{first.children}</span>
            <span class="bar-track" aria-hidden="true">
                <span class=first.bar_class style=first.bar_style node_ref=parts.bar></span>
            </span>
            <span class="dur" node_ref=parts.duration>{first.duration}</span>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::test_node;
    use super::*;

    fn shown(node: SpanNode, expanded: bool) -> Shown {
        let drawn = Some((
            7,
            Row::Node {
                id: node.span_id.clone(),
                depth: 2,
            },
            Some(node),
        ));
        let state = State {
            expanded,
            selected: false,
            focused: false,
            axis: (0, 10),
        };
        Shown::of(&drawn, &state).unwrap_or_default()
    }

    #[test]
    fn a_row_shows_its_span_and_only_the_parts_it_has() {
        let leaf = shown(test_node("leaf", 0), false);
        assert_eq!(leaf.dom_id, None);
        assert_eq!(leaf.level, "3");
        assert_eq!((leaf.expanded, leaf.toggle), (None, ""));
        assert_eq!((leaf.below, leaf.children), (None, None));
        assert_eq!(leaf.style, "top: 182px; padding-left: 36px");
        assert_eq!(leaf.bar_style, "left: 0.00%; width: 10.00%");

        let mut parent = test_node("parent", 3);
        parent.error_count = 2;
        let open = shown(parent.clone(), true);
        assert_eq!((open.expanded, open.toggle), (Some("true"), "▾"));
        assert_eq!(open.below.as_deref(), Some("2 failed below"));
        assert_eq!(open.children.as_deref(), Some("3 children"));
        let closed = shown(parent.clone(), false);
        assert_eq!((closed.expanded, closed.toggle), (Some("false"), "▸"));
        let drawn = Some((
            0,
            Row::Node {
                id: "parent".into(),
                depth: 0,
            },
            Some(parent),
        ));
        let state = State {
            expanded: false,
            selected: true,
            focused: false,
            axis: (0, 1),
        };
        let selected = Shown::of(&drawn, &state).unwrap_or_default();
        assert_eq!(selected.dom_id.as_deref(), Some("node-parent"));
        // A row that is not a span's shows nothing here.
        let more = Some((1, Row::Loading { depth: 0 }, None));
        let state = State {
            expanded: false,
            selected: false,
            focused: false,
            axis: (0, 1),
        };
        assert!(Shown::of(&more, &state).is_none());
    }
}
