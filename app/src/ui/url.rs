//! The `/traces` workspace's state, kept in its URL so a copied link reopens the
//! same selection and filters. Pages and components alike read it from here.

use crate::ui::api::query_string;
use crate::ui::format;
use treeline_wire::filter::TraceFilter;
use treeline_wire::query::{parse_comma, parse_order, ListQuery, TraceSort};
use treeline_wire::text::TextQuery;
use treeline_wire::{Invalid, SpanKind, SpanStatus};

/// The workspace's state as the query string carries it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct WorkspaceUrl {
    pub run_id: Option<String>,
    pub trace_id: Option<String>,
    pub span_id: Option<String>,
    pub project: Option<String>,
    pub status: Option<String>,
    pub kind: Option<String>,
    pub q: Option<String>,
    /// Words and quoted phrases searched in span bodies.
    pub text: Option<String>,
    /// Trace filters (`FIELD OP VALUE`), all of which must hold.
    pub filters: Vec<String>,
    /// The list's order: `updated` (default), `duration`, … or `attr.NAME`.
    pub sort: Option<String>,
    /// `asc`, or descending by default.
    pub order: Option<String>,
    /// Root attributes shown as columns of the trace list, comma-separated.
    pub cols: Option<String>,
    /// The time window of a list across runs: a [`WINDOWS`] key, or `range` with
    /// `from` and `to` (UTC minutes, `2026-11-29T14:05`). None: the server's default.
    pub window: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    /// The steps listed, inclusive: a heatmap cell's or a changed range's.
    pub min_step: Option<i64>,
    pub max_step: Option<i64>,
    /// Review mode, on the annotation a digit key writes (`score`): `j`/`k` step
    /// through the list, so a review can be split between people by link.
    pub review: Option<String>,
    /// In review mode, the string annotation that letter keys write, each letter one
    /// of its most used values in the run (`label`). None: the run's first.
    pub label: Option<String>,
}

/// Traces per page of the workspace's list.
pub(crate) const LIST_PAGE: usize = 50;

/// The relative windows offered for browsing across runs: (key, label, length).
pub(crate) const WINDOWS: [(&str, &str, i64); 4] = [
    ("1h", "Last hour", 3_600_000_000),
    ("1d", "Last day", 86_400_000_000),
    ("7d", "Last 7 days", 7 * 86_400_000_000),
    ("30d", "Last 30 days", 30 * 86_400_000_000),
];

impl WorkspaceUrl {
    pub(crate) fn from_query(map: &leptos_router::params::ParamsMap) -> Self {
        let get = |k: &str| map.get(k).filter(|v| !v.is_empty());
        WorkspaceUrl {
            run_id: get("run_id"),
            trace_id: get("trace_id"),
            span_id: get("span_id"),
            project: get("project"),
            status: get("status"),
            kind: get("kind"),
            q: get("q"),
            text: get("text"),
            filters: map
                .get_all("filter")
                .unwrap_or_default()
                .into_iter()
                .filter(|f| !f.is_empty())
                .collect(),
            sort: get("sort"),
            order: get("order"),
            cols: get("cols"),
            window: get("window"),
            from: get("from"),
            to: get("to"),
            min_step: get("min_step").and_then(|s| s.parse().ok()),
            max_step: get("max_step").and_then(|s| s.parse().ok()),
            review: get("review"),
            label: get("label"),
        }
    }

    /// The (since, until) microseconds the window asks for, seen at `now_us`: a
    /// relative window ends now; a range runs from its first minute to the end of
    /// its last. Without one, a run's list covers the whole run, and a list across
    /// runs the server's browsing window.
    pub(crate) fn window_bounds(&self, now_us: i64) -> (Option<i64>, Option<i64>) {
        match self.window.as_deref() {
            Some("range") => (
                self.from.as_deref().and_then(format::parse_utc_minute),
                self.to
                    .as_deref()
                    .and_then(format::parse_utc_minute)
                    .map(|to| to + 59_999_999),
            ),
            Some(key) => match WINDOWS.iter().find(|(k, _, _)| *k == key) {
                // Down to the minute, so the query stays the same for a while.
                Some((_, _, length)) => (Some(now_us - now_us % 60_000_000 - length), None),
                None => (None, None),
            },
            None => (None, None),
        }
    }

    /// The list's own parameters (filters and order) as query-string pairs.
    fn list_pairs(&self) -> Vec<(&'static str, Option<String>)> {
        let mut pairs: Vec<(&'static str, Option<String>)> = self
            .filters
            .iter()
            .map(|f| ("filter", Some(f.clone())))
            .collect();
        pairs.push(("sort", self.sort.clone()));
        pairs.push(("order", self.order.clone()));
        pairs.push(("min_step", self.min_step.map(|s| s.to_string())));
        pairs.push(("max_step", self.max_step.map(|s| s.to_string())));
        pairs
    }

    /// The pinned attribute columns.
    pub(crate) fn columns(&self) -> Vec<String> {
        self.cols
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect()
    }

    pub(crate) fn href(&self) -> String {
        let query = query_string(&[
            ("run_id", self.run_id.clone()),
            ("trace_id", self.trace_id.clone()),
            ("span_id", self.span_id.clone()),
            ("project", self.project.clone()),
            ("status", self.status.clone()),
            ("kind", self.kind.clone()),
            ("q", self.q.clone()),
            ("text", self.text.clone()),
        ]);
        let mut pairs = self.list_pairs();
        pairs.push(("cols", self.cols.clone()));
        pairs.push(("window", self.window.clone()));
        pairs.push(("from", self.from.clone()));
        pairs.push(("to", self.to.clone()));
        pairs.push(("review", self.review.clone()));
        pairs.push(("label", self.label.clone()));
        let more = query_string(&pairs);
        let query = [query, more]
            .into_iter()
            .filter(|q| !q.is_empty())
            .collect::<Vec<_>>()
            .join("&");
        if query.is_empty() {
            "/traces".into()
        } else {
            format!("/traces?{query}")
        }
    }

    /// The trace list's filters as the API takes them; a value the API would refuse
    /// is refused here, in the API's words.
    pub(crate) fn list_query(&self) -> Result<ListQuery, Invalid> {
        let (since_us, until_us) = self.window_bounds(format::now_us());
        Ok(ListQuery {
            // Within a run, the list is the run's: the project filter does not apply.
            project: self.project.clone().filter(|_| self.run_id.is_none()),
            statuses: non_empty(&self.status).map_or(Ok(Vec::new()), |l| {
                parse_comma(l, "status", SpanStatus::parse_field)
            })?,
            kinds: non_empty(&self.kind).map_or(Ok(Vec::new()), |l| {
                parse_comma(l, "kind", SpanKind::parse_field)
            })?,
            terms: self
                .q
                .as_deref()
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_string)
                .collect(),
            text: non_empty(&self.text).map(TextQuery::parse).transpose()?,
            filters: self
                .filters
                .iter()
                .map(|f| TraceFilter::parse(f))
                .collect::<Result<_, _>>()?,
            since_us,
            until_us,
            min_step: self.min_step.filter(|s| *s >= 0),
            max_step: self.max_step.filter(|s| *s >= 0),
            sort: self
                .sort
                .as_deref()
                .map_or(Ok(TraceSort::Updated), TraceSort::parse)?,
            ascending: self.order.as_deref().map_or(Ok(false), parse_order)?,
            ..ListQuery::default()
        })
    }

    pub(crate) fn with_selection(
        &self,
        run_id: &str,
        trace_id: &str,
        span_id: Option<&str>,
    ) -> Self {
        WorkspaceUrl {
            run_id: Some(run_id.to_string()),
            trace_id: Some(trace_id.to_string()),
            span_id: span_id.map(str::to_string),
            ..self.clone()
        }
    }
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

/// A run-scoped link into the workspace.
pub(crate) fn link(run_id: &str, trace_id: &str, span_id: Option<&str>) -> String {
    WorkspaceUrl::default()
        .with_selection(run_id, trace_id, span_id)
        .href()
}

/// Each value of `name` once, in order, empty ones dropped.
pub(crate) fn all_of(map: &leptos_router::params::ParamsMap, name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in map.get_all(name).unwrap_or_default() {
        if !v.is_empty() && !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// The query of a page's `href` as the router would hand it over, for tests.
#[cfg(test)]
pub(crate) fn params_of(href: &str) -> leptos_router::params::ParamsMap {
    let mut map = leptos_router::params::ParamsMap::new();
    let query = href.split_once('?').map(|(_, q)| q).unwrap_or_default();
    for (k, v) in query.split('&').filter_map(|pair| pair.split_once('=')) {
        map.insert(k.to_string(), decode(v));
    }
    map
}

#[cfg(test)]
fn decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        // A `%` without two hex digits after it is kept as written; read as a zero
        // byte, it put a NUL into the page's API calls.
        let escaped = bytes
            .get(i + 1..i + 3)
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        if let (b'%', Some(byte)) = (bytes[i], escaped) {
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_escape_is_kept_as_written() {
        assert_eq!(decode("100%zz%"), "100%zz%");
        assert_eq!(decode("a%20b%41"), "a bA");
    }

    #[test]
    fn a_selection_round_trips_through_its_href() {
        assert_eq!(WorkspaceUrl::default().href(), "/traces");
        let url = WorkspaceUrl {
            project: Some("p".into()),
            status: Some("error".into()),
            ..Default::default()
        }
        .with_selection("r", "t", Some("s"));
        assert_eq!(
            url.href(),
            "/traces?run_id=r&trace_id=t&span_id=s&project=p&status=error"
        );
        assert_eq!(
            url.href(),
            link("r", "t", Some("s")) + "&project=p&status=error"
        );
        // Within a run, the list is the run's: the project filter does not apply.
        assert_eq!(url.list_query().unwrap().to_query(), "status=error");
    }

    #[test]
    fn filters_order_and_columns_ride_the_url() {
        let url = WorkspaceUrl {
            filters: vec!["error_count > 0".into(), "attr.reward < 0.5".into()],
            sort: Some("attr.reward".into()),
            order: Some("asc".into()),
            cols: Some("reward,task".into()),
            ..Default::default()
        }
        .with_selection("r", "t", None);
        let href = url.href();
        assert_eq!(
            href,
            "/traces?run_id=r&trace_id=t&filter=error_count%20%3E%200\
             &filter=attr.reward%20%3C%200.5&sort=attr.reward&order=asc&cols=reward%2Ctask"
        );
        assert_eq!(
            url.list_query().unwrap().to_query(),
            "filter=error_count+%3E+0&filter=attr.reward+%3C+0.5&sort=attr.reward&order=asc"
        );
        assert_eq!(url.columns(), ["reward", "task"]);
        assert_eq!(WorkspaceUrl::from_query(&params_of(&href)), url);
    }

    #[test]
    fn a_window_bounds_the_list_in_a_run_or_across_runs() {
        let hour = 3_600_000_000;
        let minute = 1_780_000_020_000_000; // a whole minute
        let now = minute + 30_000_000;
        let url = |window: &str, from: &str, to: &str| WorkspaceUrl {
            window: Some(window.into()),
            from: (!from.is_empty()).then(|| from.into()),
            to: (!to.is_empty()).then(|| to.into()),
            ..Default::default()
        };
        assert_eq!(
            url("1h", "", "").window_bounds(now),
            (Some(minute - hour), None)
        );
        assert_eq!(
            url("30d", "", "").window_bounds(now),
            (Some(minute - 720 * hour), None)
        );
        let range = url("range", "2026-11-29T14:05", "2026-11-30T09:00");
        let from = format::parse_utc_minute("2026-11-29T14:05");
        let to = format::parse_utc_minute("2026-11-30T09:00").map(|t| t + 59_999_999);
        assert_eq!(range.window_bounds(now), (from, to));
        assert_eq!(
            url("range", "yesterday", "").window_bounds(now),
            (None, None)
        );
        assert_eq!(url("2w", "", "").window_bounds(now), (None, None));
        // A run's traces narrowed to the range, and the whole run without one.
        let in_run = range.with_selection("r", "t", None);
        assert_eq!(in_run.window_bounds(now), (from, to));
        let whole = WorkspaceUrl {
            window: None,
            ..in_run.clone()
        };
        assert_eq!(whole.window_bounds(now), (None, None));
        assert!(in_run
            .href()
            .contains("window=range&from=2026-11-29T14%3A05"));
    }

    #[test]
    fn utc_minutes_parse_and_print() {
        let t = format::parse_utc_minute("2026-11-29T14:05").expect("valid");
        assert_eq!(format::utc_minute(t), "2026-11-29T14:05");
        assert_eq!(format::parse_utc_minute("2026-11-29 14:05"), Some(t));
        assert_eq!(format::parse_utc_minute("2026-02-31T00:00"), None);
        assert_eq!(format::parse_utc_minute("2026-11-29T24:00"), None);
        assert_eq!(format::parse_utc_minute("2026-11-29"), None);
        // From a URL, on the server too: a huge month is refused, not overflowed.
        assert_eq!(
            format::parse_utc_minute("2026-9223372036854775807-01T00:00"),
            None
        );
    }
}
