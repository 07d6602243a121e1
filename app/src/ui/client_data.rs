//! Data the browser fetches for itself, read only once the page is hydrated.
//!
//! A `LocalResource` is never loaded on the server, and reading one inside a
//! `Suspense` or `Transition` there makes the boundary race its fallback against its
//! children: the same deep link rendered the inspector on one request and "Loading
//! span…" on the next, and where the browser's idea of which one won differed from the
//! HTML, hydration panicked. Behind [`ClientData`] the server and the hydrating browser
//! both see `None`, and the data appears from the first effect on.

use std::future::Future;

use leptos::prelude::*;

/// A `LocalResource` that reads `None` until the page is hydrated.
pub(crate) struct ClientData<T: 'static> {
    #[allow(clippy::disallowed_types, reason = "the one place it is wrapped")]
    data: LocalResource<T>,
    hydrated: ReadSignal<bool>,
}

impl<T: 'static> Clone for ClientData<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: 'static> Copy for ClientData<T> {}

impl<T: Clone + 'static> ClientData<T> {
    /// Starts the fetch in the browser (never on the server), rerun when what
    /// `fetcher` tracks changes.
    #[track_caller]
    pub(crate) fn new<Fut>(fetcher: impl Fn() -> Fut + 'static) -> Self
    where
        Fut: Future<Output = T> + 'static,
    {
        let (hydrated, set_hydrated) = signal(false);
        // Effects run in the browser only, and only after hydration.
        Effect::new(move |_| set_hydrated.set(true));
        #[allow(clippy::disallowed_types, reason = "the one place it is wrapped")]
        let data = LocalResource::new(fetcher);
        Self { data, hydrated }
    }

    /// The value, tracked; `None` while loading, on the server and during hydration.
    pub(crate) fn get(&self) -> Option<T> {
        if self.hydrated.get() {
            self.data.get()
        } else {
            None
        }
    }

    /// Applies `f` to the value, tracked; `None` as for [`ClientData::get`].
    pub(crate) fn with<U>(&self, f: impl FnOnce(&Option<T>) -> U) -> U {
        f(&self.get())
    }
}
