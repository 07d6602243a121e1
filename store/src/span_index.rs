//! Which `span.attr.` filter of a list an index answers: a short string's
//! equality through `span_texts`, a number's or boolean's comparison through
//! `span_ranges`. And the traces whose rows there may be stale,
//! `span_attribute_overwrites`: a list takes every other trace's rows as exact.

use foldhash::HashSet;
use treeline_wire::filter::TraceFilter;

use super::dialect::{Dialect, Sql};
use super::ingest::SpanWrite;
use super::span_ranges::RangeTest;
use super::span_texts;
use super::statements::push_rows;

/// A span filter an index answers.
pub(super) enum Indexed<'a> {
    /// `span.attr.NAME` equal to (or `in`) short strings: its key and values.
    Texts(&'a str, Vec<&'a str>),
    Ranges(RangeTest<'a>),
}

impl<'a> Indexed<'a> {
    /// The first of `filters` that `span_texts` answers, else the first that
    /// `span_ranges` does: a string's equality is the narrower.
    pub(super) fn find(filters: &'a [TraceFilter]) -> Option<Self> {
        let texts = filters.iter().find_map(span_texts::looked_up);
        let texts = texts.map(|(key, values)| Indexed::Texts(key, values));
        texts.or_else(|| filters.iter().find_map(RangeTest::of).map(Indexed::Ranges))
    }

    /// The table of the rows, to be read as `x`.
    pub(super) fn table(&self) -> &'static str {
        match self {
            Indexed::Texts(..) => "span_texts",
            Indexed::Ranges(_) => "span_ranges",
        }
    }

    /// Pushes ` AND` the filter's test of the rows `x`.
    pub(super) fn push_test<DB: Dialect>(&self, q: &mut Sql<'a, DB>) {
        match self {
            Indexed::Texts(key, values) => span_texts::push_test(q, key, values),
            Indexed::Ranges(test) => test.push(q),
        }
    }

    /// Whether a trace whose rows pass holds a span that passes, unless it is
    /// named in `span_attribute_overwrites`.
    pub(super) fn exact(&self) -> bool {
        match self {
            Indexed::Texts(..) => true,
            Indexed::Ranges(test) => test.exact(),
        }
    }
}

/// The traces of `spans` whose attributes a span stored by an earlier batch
/// changes: the rows that batch made may now name a value or bound no span holds.
/// Names stored before are not read, so a new name on such a span counts too.
pub(super) fn overwritten(spans: &[SpanWrite]) -> Vec<&str> {
    let changed = spans
        .iter()
        .filter(|w| w.stored_attrs > 0 && !w.attributes.is_empty());
    let traces: HashSet<&str> = changed.map(|w| w.state.trace_id.as_str()).collect();
    traces.into_iter().collect()
}

/// Names `traces` in `span_attribute_overwrites`, keeping the ones named already.
pub(super) fn insert_overwritten<'a, DB: Dialect>(
    q: &mut Sql<'a, DB>,
    run_id: &'a str,
    traces: &[&'a str],
) {
    q.push("INSERT INTO span_attribute_overwrites (run_id, trace_id) ");
    push_rows(q, traces.iter().copied(), |trace_id| {
        [run_id.into(), trace_id.into()]
    });
    q.push(" ON CONFLICT (run_id, trace_id) DO NOTHING");
}
