//! The runs list's state, kept in its URL so a view of a sweep is a link: the
//! project, the runs ticked for a comparison, the summary columns and the sort.

use leptos_router::params::ParamsMap;
use treeline_wire::limits::RUNS_PAGE_MAX;
use treeline_wire::run_list::RunListQuery;
use treeline_wire::Invalid;

use super::api::encode;
use super::url::all_of;

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RunsUrl {
    pub project: Option<String>,
    /// Runs ticked for a comparison, in the order ticked.
    pub picks: Vec<String>,
    /// Summary columns as written in the API (`last:reward`, `config:lr`).
    pub columns: Vec<String>,
    pub sort: Option<String>,
    pub ascending: bool,
}

impl RunsUrl {
    pub(crate) fn from_query(map: &ParamsMap) -> Self {
        let get = |k: &str| map.get(k).filter(|v| !v.is_empty());
        RunsUrl {
            project: get("project"),
            picks: all_of(map, "pick"),
            columns: all_of(map, "column"),
            sort: get("sort"),
            ascending: get("order").as_deref() == Some("asc"),
        }
    }

    /// The list to ask the server for; a bad column in a pasted link is refused
    /// with the API's own words.
    pub(crate) fn list_query(&self) -> Result<RunListQuery, Invalid> {
        let mut q = RunListQuery::parse(&self.api_pairs().join("&"))?;
        q.limit = RUNS_PAGE_MAX;
        Ok(q)
    }

    fn api_pairs(&self) -> Vec<String> {
        let mut pairs: Vec<String> = Vec::new();
        if let Some(p) = &self.project {
            pairs.push(format!("project={}", encode(p)));
        }
        pairs.extend(self.columns.iter().map(|c| format!("column={}", encode(c))));
        if let Some(s) = &self.sort {
            pairs.push(format!("sort={}", encode(s)));
            if self.ascending {
                pairs.push("order=asc".into());
            }
        }
        pairs
    }

    pub(crate) fn href(&self) -> String {
        let mut pairs = self.api_pairs();
        pairs.extend(self.picks.iter().map(|id| format!("pick={}", encode(id))));
        if pairs.is_empty() {
            "/".into()
        } else {
            format!("/?{}", pairs.join("&"))
        }
    }

    pub(crate) fn with_picks(&self, picks: Vec<String>) -> Self {
        RunsUrl {
            picks,
            ..self.clone()
        }
    }

    pub(crate) fn with_column(&self, column: String) -> Self {
        let mut next = self.clone();
        if !next.columns.contains(&column) {
            next.columns.push(column);
        }
        next
    }

    /// Without `column`, and unsorted if it was sorted by it.
    pub(crate) fn without_column(&self, column: &str) -> Self {
        let mut next = self.clone();
        next.columns.retain(|c| c != column);
        if next.sort.as_deref() == Some(column) {
            next.sort = None;
            next.ascending = false;
        }
        next
    }

    /// A click on a column's head: largest first, then smallest first, then
    /// newest runs first again.
    pub(crate) fn sorted_by(&self, column: &str) -> Self {
        let mut next = self.clone();
        match (self.sort.as_deref() == Some(column), self.ascending) {
            (false, _) => {
                next.sort = Some(column.to_string());
                next.ascending = false;
            }
            (true, false) => next.ascending = true,
            (true, true) => {
                next.sort = None;
                next.ascending = false;
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::url::params_of;

    #[test]
    fn a_view_reads_back_from_its_link() {
        let url = RunsUrl {
            project: Some("rl sweep".into()),
            picks: vec!["a".into(), "b".into()],
            columns: vec!["last:reward/mean".into(), "config:lr".into()],
            sort: Some("config:lr".into()),
            ascending: true,
        };
        let href = url.href();
        assert_eq!(
            href,
            "/?project=rl%20sweep&column=last%3Areward%2Fmean&column=config%3Alr\
             &sort=config%3Alr&order=asc&pick=a&pick=b"
        );
        assert_eq!(RunsUrl::from_query(&params_of(&href)), url);
        assert_eq!(RunsUrl::default().href(), "/");
    }

    #[test]
    fn a_heads_clicks_go_largest_smallest_then_newest() {
        let url = RunsUrl::default().with_column("max:kl".into());
        let once = url.sorted_by("max:kl");
        assert_eq!(
            (once.sort.as_deref(), once.ascending),
            (Some("max:kl"), false)
        );
        let twice = once.sorted_by("max:kl");
        assert_eq!(
            (twice.sort.as_deref(), twice.ascending),
            (Some("max:kl"), true)
        );
        assert_eq!(twice.sorted_by("max:kl").sort, None);
        // Removing the sorted column unsorts the list.
        assert_eq!(once.without_column("max:kl"), RunsUrl::default());
    }

    #[test]
    fn a_bad_column_in_a_link_is_named() {
        let url = RunsUrl {
            columns: vec!["avg:reward".into()],
            ..RunsUrl::default()
        };
        let err = url.list_query().unwrap_err();
        assert!(err.message.contains("avg"), "{}", err.message);
        let fine = RunsUrl::default().with_column("last:reward".into());
        assert_eq!(fine.list_query().map(|q| q.columns.len()), Ok(1));
    }
}
