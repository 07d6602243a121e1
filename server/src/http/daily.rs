//! A project's run of the day, for a tracer that has a project and no run of its own
//! (a service, an evaluator): the run OTLP puts that project's spans in when they
//! name no run, found or created by the same rules, so both land in one place.

use axum::extract::{Path, State};
use axum::Json;
use treeline_wire::{check_project, DailyRun};

use super::auth::Principal;
use super::error::{ApiError, ApiResult};
use super::{now_us, AppState};
use crate::otlp::runs;

pub(super) async fn daily_run(
    State(state): State<AppState>,
    who: Principal,
    Path(project): Path<String>,
) -> ApiResult<Json<DailyRun>> {
    check_project(&project)?;
    if !who.sees(&project) {
        return Err(ApiError::forbidden(
            "forbidden",
            format!(
                "this key writes only to project {:?}, not {project:?}",
                who.project.as_deref().unwrap_or_default()
            ),
        ));
    }
    let now = now_us();
    let day = runs::day_of(now);
    let name = runs::daily_run_name(&project, day);
    let placed = state
        .daily_runs
        .daily(
            state.store.as_ref(),
            &runs::daily_run_id(&project, day),
            &project,
            &name,
            now,
        )
        .await?;
    let Some(run_id) = placed else {
        return Err(ApiError::Conflict(format!(
            "project {project:?}'s run of the day and its alternates are taken by runs of \
             other projects; write to a run of your own (PUT /runs/{{run_id}})"
        )));
    };
    Ok(Json(DailyRun {
        run_id,
        name,
        project,
        date: runs::date(day),
    }))
}
