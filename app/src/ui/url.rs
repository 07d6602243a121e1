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
        }
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
        query_string(&[
            ("project", project),
            ("status", self.status.clone()),
            ("kind", self.kind.clone()),
            ("q", self.q.clone()),
        ])
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
}
