//! The scroller's state: where it is scrolled and how tall it is, which decide the
//! slice of rows drawn (see `window` for the arithmetic).

use std::ops::Range;

use leptos::prelude::*;

use super::window;

#[derive(Clone, Copy)]
pub(super) struct Viewport {
    pub(super) el: NodeRef<leptos::html::Div>,
    top: RwSignal<f64>,
    height: RwSignal<f64>,
}

impl Viewport {
    /// A viewport that opens scrolled to `initial_top`, on the server (where the
    /// height is a guess) and after hydration alike.
    pub(super) fn new(initial_top: f64) -> Self {
        let viewport = Viewport {
            el: NodeRef::new(),
            top: RwSignal::new(initial_top),
            height: RwSignal::new(900.0),
        };
        Effect::new(move |_| {
            if let Some(el) = viewport.el.get() {
                el.set_scroll_top(initial_top as i32);
                viewport.measure(&el);
            }
        });
        viewport
    }

    pub(super) fn on_scroll(self, ev: &leptos::ev::Event) {
        let el = event_target::<leptos::web_sys::Element>(ev);
        self.top.set(f64::from(el.scroll_top()));
        self.measure(&el);
    }

    /// Sets the height only when it changed: a set, even to the same value, marks
    /// everything drawn from it to be checked (a profile: a fifth of a scroll's
    /// handler).
    fn measure(self, el: &leptos::web_sys::Element) {
        let height = f64::from(el.client_height()).max(200.0);
        if self.height.get_untracked() != height {
            self.height.set(height);
        }
    }

    /// The rows to draw, of `len`. A memo, so a scroll within the drawn margin
    /// redraws nothing.
    pub(super) fn slice(
        self,
        len: impl Fn() -> usize + Send + Sync + 'static,
    ) -> Memo<Range<usize>> {
        Memo::new(move |_| window::slice(self.top.get(), self.height.get(), len()))
    }

    /// How many row elements the view keeps (see [`window::slots`]).
    pub(super) fn slots(self) -> Memo<usize> {
        Memo::new(move |_| window::slots(self.height.get()))
    }

    /// Scrolls so that `row` is in view.
    pub(super) fn keep_in_view(self, row: usize) {
        if let Some(el) = self.el.get_untracked() {
            let (top, height) = (f64::from(el.scroll_top()), f64::from(el.client_height()));
            if let Some(to) = window::keep_in_view(row, top, height) {
                el.set_scroll_top(to as i32);
            }
        }
    }
}
