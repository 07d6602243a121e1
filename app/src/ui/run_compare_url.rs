//! The compare-runs page's state, kept in its URL so a comparison is a link: the
//! runs, the metrics drawn, the smoothing, the x-axis, the zoom and the hidden runs.

use treeline_wire::run_compare::CompareRunsQuery;

use crate::ui::api::encode;
use crate::ui::url::all_of;

/// What the charts' x-axis measures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum XAxis {
    #[default]
    Step,
    /// The time each point was logged (UTC).
    Wall,
    /// The time since its run started.
    Elapsed,
}

impl XAxis {
    pub(crate) const ALL: [XAxis; 3] = [XAxis::Step, XAxis::Wall, XAxis::Elapsed];

    fn parse(text: &str) -> Option<XAxis> {
        XAxis::ALL.into_iter().find(|x| x.param() == text)
    }

    pub(crate) fn param(self) -> &'static str {
        match self {
            XAxis::Step => "step",
            XAxis::Wall => "wall",
            XAxis::Elapsed => "elapsed",
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            XAxis::Step => "Step",
            XAxis::Wall => "Wall time (UTC)",
            XAxis::Elapsed => "Time since start",
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RunCompareUrl {
    /// In the order given, repeats dropped, all kept: the server refuses
    /// more than it takes, and the page shows why.
    pub runs: Vec<String>,
    /// The metrics drawn; none: the server's choice (the most shared).
    pub keys: Vec<String>,
    /// The moving average's weight of the past, 0 (none) to 0.99.
    pub smooth: f64,
    pub x: XAxis,
    /// The zoomed range of the x-axis, in its units (steps, or microseconds).
    pub zoom: Option<(i64, i64)>,
    /// Runs whose lines are hidden.
    pub hide: Vec<String>,
}

/// The most a reader can smooth: past it the line no longer moves.
pub(crate) const MAX_SMOOTH: f64 = 0.99;

impl RunCompareUrl {
    pub(crate) fn from_query(map: &leptos_router::params::ParamsMap) -> Self {
        let get = |k: &str| map.get(k).filter(|v| !v.is_empty());
        let (runs, keys) = (all_of(map, "run"), all_of(map, "key"));
        let number = |k: &str| get(k).and_then(|v| v.parse::<i64>().ok());
        let zoom = match (number("from"), number("to")) {
            (Some(a), Some(b)) if a < b => Some((a, b)),
            _ => None,
        };
        RunCompareUrl {
            runs,
            keys,
            smooth: get("smooth")
                .and_then(|s| s.parse::<f64>().ok())
                .filter(|s| s.is_finite())
                .map_or(0.0, |s| s.clamp(0.0, MAX_SMOOTH)),
            x: get("x")
                .as_deref()
                .and_then(XAxis::parse)
                .unwrap_or_default(),
            zoom,
            hide: get("hide")
                .unwrap_or_default()
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        }
    }

    pub(crate) fn href(&self) -> String {
        let mut pairs: Vec<String> = Vec::new();
        pairs.extend(self.runs.iter().map(|r| format!("run={}", encode(r))));
        pairs.extend(self.keys.iter().map(|k| format!("key={}", encode(k))));
        if self.smooth > 0.0 {
            pairs.push(format!("smooth={:.2}", self.smooth));
        }
        if self.x != XAxis::Step {
            pairs.push(format!("x={}", self.x.param()));
        }
        if let Some((a, b)) = self.zoom {
            pairs.push(format!("from={a}&to={b}"));
        }
        if !self.hide.is_empty() {
            pairs.push(format!("hide={}", encode(&self.hide.join(","))));
        }
        format!("/compare-runs?{}", pairs.join("&"))
    }

    /// What to ask the server: the zoom narrows the steps read (so a zoomed chart
    /// has its full detail) only where the axis is the step.
    pub(crate) fn query(&self) -> CompareRunsQuery {
        let mut q = CompareRunsQuery::new(self.runs.clone());
        q.keys = self.keys.clone();
        if let (XAxis::Step, Some((a, b))) = (self.x, self.zoom) {
            q.min_step = Some(a.max(0));
            q.max_step = Some(b.max(0));
        }
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::url::params_of;

    #[test]
    fn the_state_survives_its_link() {
        let url = RunCompareUrl {
            runs: vec!["a".into(), "b c".into()],
            keys: vec!["train/loss".into()],
            smooth: 0.6,
            x: XAxis::Elapsed,
            zoom: Some((5, 90)),
            hide: vec!["a".into()],
        };
        let href = url.href();
        assert_eq!(
            href,
            "/compare-runs?run=a&run=b%20c&key=train%2Floss&smooth=0.60&x=elapsed&from=5&to=90&hide=a"
        );
        assert_eq!(RunCompareUrl::from_query(&params_of(&href)), url);
    }

    #[test]
    fn odd_values_fall_back_and_zoom_reaches_the_server_on_steps_only() {
        let url = RunCompareUrl::from_query(&params_of(
            "/compare-runs?run=a&run=a&run=b&smooth=7&x=sideways&from=9&to=3",
        ));
        assert_eq!(url.runs, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(
            (url.smooth, url.x, url.zoom),
            (MAX_SMOOTH, XAxis::Step, None)
        );
        let zoomed = RunCompareUrl {
            zoom: Some((10, 20)),
            ..url.clone()
        };
        assert_eq!(zoomed.query().min_step, Some(10));
        let wall = RunCompareUrl {
            x: XAxis::Wall,
            ..zoomed
        };
        assert_eq!(wall.query().min_step, None);
    }
}
