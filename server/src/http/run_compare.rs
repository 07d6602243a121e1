//! Several runs side by side: their configs, and each metric with a line per run.

use axum::extract::{RawQuery, State};
use axum::Json;
use futures::{StreamExt, TryStreamExt};
use treeline_wire::run_compare::{
    key_coverage, CompareRunsQuery, ComparedMetric, RunComparison, RunSeries, COMPARE_KEYS_DEFAULT,
};

use super::auth::Principal;
use super::error::ApiResult;
use super::params::find_run;
use super::AppState;
use crate::store::SeriesWindow;

/// Series read at once: enough to keep both cores busy on SQLite, few enough that
/// one comparison leaves connections for everyone else.
const PARALLEL_SERIES: usize = 4;

pub(super) async fn compare_runs(
    State(state): State<AppState>,
    who: Principal,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<RunComparison>> {
    let query = CompareRunsQuery::parse(raw.as_deref().unwrap_or_default())?;
    // Every run is checked before any series is read: an unknown run (or another
    // project's, for a project key) is a 404 that names it.
    let mut runs = Vec::with_capacity(query.runs.len());
    for run_id in &query.runs {
        runs.push(find_run(&state, &who, run_id).await?);
    }
    let keys = key_coverage(&runs);
    let drawn: Vec<String> = if query.keys.is_empty() {
        keys.iter()
            .take(COMPARE_KEYS_DEFAULT)
            .map(|k| k.key.clone())
            .collect()
    } else {
        query.keys.clone()
    };
    let window = SeriesWindow {
        max_points: query.max_points,
        min_step: query.min_step,
        max_step: query.max_step,
    };
    // Owned, so each read is a future of its own that the stream may hold.
    let wanted: Vec<(usize, String, String)> = drawn
        .iter()
        .enumerate()
        .flat_map(|(i, key)| {
            runs.iter()
                .filter(move |r| r.metric_keys.iter().any(|k| k == key))
                .map(move |r| (i, r.summary.run_id.clone(), key.clone()))
        })
        .collect();
    let read: Vec<(usize, RunSeries)> = futures::stream::iter(wanted)
        .map(|(i, run_id, key)| {
            let store = state.store.clone();
            async move {
                let series = store
                    .query_reads()
                    .metric_series(&run_id, &key, window)
                    .await?;
                Ok::<_, crate::store::StoreError>((i, RunSeries { run_id, series }))
            }
        })
        .buffered(PARALLEL_SERIES)
        .try_collect()
        .await?;
    let mut metrics: Vec<ComparedMetric> = drawn
        .into_iter()
        .map(|key| ComparedMetric {
            key,
            series: Vec::new(),
        })
        .collect();
    for (i, series) in read {
        if let Some(m) = metrics.get_mut(i) {
            m.series.push(series);
        }
    }
    Ok(Json(RunComparison {
        runs,
        keys,
        metrics,
    }))
}
