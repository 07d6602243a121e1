//! The `/traces` workspace's state, kept in its URL so a copied link reopens the
//! same selection and filters. Pages and components alike read it from here.

use crate::ui::api::query_string;

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
    /// Trace filters (`FIELD OP VALUE`), all of which must hold.
    pub filters: Vec<String>,
    /// The list's order: `updated` (default), `duration`, … or `attr.NAME`.
    pub sort: Option<String>,
    /// `asc`, or descending by default.
    pub order: Option<String>,
    /// Root attributes shown as columns of the trace list, comma-separated.
    pub cols: Option<String>,
}

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
            filters: map
                .get_all("filter")
                .unwrap_or_default()
                .into_iter()
                .filter(|f| !f.is_empty())
                .collect(),
            sort: get("sort"),
            order: get("order"),
            cols: get("cols"),
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
        ]);
        let mut pairs = self.list_pairs();
        pairs.push(("cols", self.cols.clone()));
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

    /// The trace list's filters as an API query string.
    pub(crate) fn list_query(&self) -> String {
        let project = if self.run_id.is_none() {
            self.project.clone()
        } else {
            None
        };
        let mut pairs = vec![
            ("project", project),
            ("status", self.status.clone()),
            ("kind", self.kind.clone()),
            ("q", self.q.clone()),
        ];
        pairs.extend(self.list_pairs());
        query_string(&pairs)
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

/// A run-scoped link into the workspace.
pub(crate) fn link(run_id: &str, trace_id: &str, span_id: Option<&str>) -> String {
    WorkspaceUrl::default()
        .with_selection(run_id, trace_id, span_id)
        .href()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(url.list_query(), "status=error");
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
            url.list_query(),
            "filter=error_count%20%3E%200&filter=attr.reward%20%3C%200.5&sort=attr.reward&order=asc"
        );
        assert_eq!(url.columns(), ["reward", "task"]);
        let mut map = leptos_router::params::ParamsMap::new();
        for (k, v) in form_pairs(href.split_once('?').map(|(_, q)| q).unwrap_or_default()) {
            map.insert(k, v);
        }
        assert_eq!(WorkspaceUrl::from_query(&map), url);
    }

    fn form_pairs(query: &str) -> Vec<(String, String)> {
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.to_string(), decode(v)))
            .collect()
    }

    fn decode(v: &str) -> String {
        let bytes = v.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("00");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).unwrap_or_default()
    }
}
