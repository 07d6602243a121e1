//! Which run and project an OTLP resource's spans belong to. A run is named by the
//! resource attribute `treeline.run_id` or the `Treeline-Run-Id` header; otherwise
//! each project gets one run per UTC day, created on first use, so an exporter
//! configured with nothing but the endpoint URL works.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use treeline_wire::{check_id, check_project, Invalid, RunUpsert};

use crate::store::{RunsAsked, Store, StoreError};

pub const RUN_ID_ATTRIBUTE: &str = "treeline.run_id";
pub const RUN_ID_HEADER: &str = "treeline-run-id";
/// Resource attributes naming the project, first found wins.
pub const PROJECT_ATTRIBUTES: [&str; 3] = [
    "treeline.project",
    "openinference.project.name",
    "service.name",
];
pub const DEFAULT_PROJECT: &str = "default";
const DAY_US: i64 = 86_400 * 1_000_000;

/// Where a resource's spans go: a named run, or the project's run of the day.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub project: String,
    pub run_id: Option<String>,
}

/// The target of a resource from its (flattened) attributes; the attribute wins over
/// the request's header. An invalid `treeline.run_id` is an error for its spans.
pub fn target(resource: &Map<String, Value>, header_run: Option<&str>) -> Result<Target, Invalid> {
    let project = PROJECT_ATTRIBUTES
        .iter()
        .filter_map(|name| resource.get(*name).and_then(Value::as_str))
        .find_map(clean_project)
        .unwrap_or_else(|| DEFAULT_PROJECT.to_string());
    let run_id = match resource.get(RUN_ID_ATTRIBUTE) {
        Some(Value::String(id)) => {
            check_id(id, RUN_ID_ATTRIBUTE)?;
            Some(id.clone())
        }
        Some(other) => {
            return Err(Invalid::new(
                "invalid_id",
                format!("{RUN_ID_ATTRIBUTE} must be a string, not {other}"),
            ))
        }
        None => header_run.map(str::to_string),
    };
    Ok(Target { project, run_id })
}

/// A project name made valid (no control characters, at most 128 characters), or
/// None when nothing is left.
fn clean_project(raw: &str) -> Option<String> {
    let cleaned: String = raw.chars().filter(|c| !c.is_control()).take(128).collect();
    let cleaned = cleaned.trim().to_string();
    check_project(&cleaned).ok().map(|_| cleaned)
}

/// The UTC day of a time, as days since the epoch.
pub fn day_of(us: i64) -> i64 {
    us.div_euclid(DAY_US)
}

/// `YYYY-MM-DD` of a day since the epoch.
pub fn date(day: i64) -> String {
    let (y, m, d) = treeline_wire::civil_date(day);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The id of a project's run of a day: the project as an id, then the date. A project
/// that had to be changed to fit the id rules gets a short hash of its real name, so
/// two projects never share a run.
pub fn daily_run_id(project: &str, day: i64) -> String {
    let mut slug = String::new();
    for c in project.chars() {
        let c = if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            c
        } else {
            '-'
        };
        if !(c == '-' && slug.ends_with('-')) {
            slug.push(c);
        }
    }
    let mut slug: String = slug
        .trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
        .chars()
        .take(40)
        .collect();
    if slug != project {
        let hash = Sha256::digest(project.as_bytes());
        let short: String = hash[..4].iter().map(|b| format!("{b:02x}")).collect();
        slug = if slug.is_empty() {
            format!("otel-{short}")
        } else {
            format!("{slug}-{short}")
        };
    }
    format!("{slug}-{}", date(day))
}

pub fn daily_run_name(project: &str, day: i64) -> String {
    treeline_wire::daily_run_name(project, &date(day))
}

/// Finishes the daily runs whose UTC day is over, ending them at their last activity:
/// an exporter has no end to send, and a run left running would show a duration that
/// grows for ever. Answers how many were finished.
pub async fn finish_past_days(store: &dyn Store, now_us: i64) -> Result<usize, StoreError> {
    let today = date(day_of(now_us));
    let mut cursor = None;
    let mut finished = 0;
    loop {
        let page = store
            .reads()
            .list_runs(RunsAsked {
                search: Some("(OpenTelemetry)"),
                ..RunsAsked::newest(None, 500, cursor.as_ref())
            })
            .await?;
        for run in &page.runs {
            let past = treeline_wire::daily_run_date(&run.project, &run.name)
                .is_some_and(|day| day < today.as_str());
            if past && run.status == treeline_wire::RunStatus::Running {
                let finish = treeline_wire::RunFinish {
                    status: treeline_wire::RunStatus::Finished,
                    end_us: Some(run.updated_us),
                };
                store.finish_run(&run.run_id, &finish, now_us).await?;
                finished += 1;
            }
        }
        match page.next_cursor {
            Some(next) => cursor = Some(crate::store::Cursor::decode(&next)?),
            None => return Ok(finished),
        }
    }
}

/// Bounds for the in-memory caches below; past them the oldest generation is dropped.
const MAX_KNOWN_RUNS: usize = 10_000;
const MAX_TRACES: usize = 200_000;

/// What this server remembers between exports: the runs known to exist, with their
/// projects (to skip a lookup per request), and the day each recent trace was given,
/// so a trace whose spans straddle midnight, or whose export is retried, stays in one
/// daily run.
#[derive(Default)]
pub struct Runs {
    known: Mutex<HashMap<String, String>>,
    traces: Mutex<(HashMap<String, i64>, HashMap<String, i64>)>,
}

/// The longest id a daily run's alternate may start with, so that `-` and six hex
/// digits keep it within the id rules' 64 characters.
const ALTERNATE_PREFIX_CHARS: usize = 57;

impl Runs {
    /// The day of a trace of `project`: the one it was given before, else that of
    /// `earliest_us`, its earliest span start in this export.
    pub fn trace_day(&self, project: &str, trace_id: &str, earliest_us: i64) -> i64 {
        let key = format!("{project}\u{0}{trace_id}");
        let Ok(mut guard) = self.traces.lock() else {
            return day_of(earliest_us);
        };
        let (current, old) = &mut *guard;
        if let Some(day) = current.get(&key) {
            return *day;
        }
        let day = old.remove(&key).unwrap_or_else(|| day_of(earliest_us));
        if current.len() >= MAX_TRACES {
            *old = std::mem::take(current);
        }
        current.insert(key, day);
        day
    }

    /// Forgets the run (it was deleted): the next export to its id asks the store,
    /// which refuses it until the run's data is gone, then creates it anew.
    pub fn forget(&self, run_id: &str) {
        if let Ok(mut known) = self.known.lock() {
            known.remove(run_id);
        }
    }

    /// The project of the run, which is created in `project` when it does not exist;
    /// one step in the store, so no request of another project can create it in
    /// between. An existing run keeps its own project and name.
    pub async fn ensure(
        &self,
        store: &dyn Store,
        run_id: &str,
        project: &str,
        name: Option<String>,
        now: i64,
    ) -> Result<String, StoreError> {
        if let Some(known) = self.known.lock().ok().and_then(|k| k.get(run_id).cloned()) {
            return Ok(known);
        }
        let run = RunUpsert {
            project: project.to_string(),
            name,
            ..Default::default()
        };
        let owner = store.ensure_run(run_id, &run, now).await?;
        if let Ok(mut known) = self.known.lock() {
            if known.len() >= MAX_KNOWN_RUNS {
                known.clear();
            }
            known.insert(run_id.to_string(), owner.clone());
        }
        Ok(owner)
    }

    /// The run a project's spans of a day go to: the daily run `daily_id`, created in
    /// `project` on first use. When another project holds that id (a run made with
    /// it by hand), the spans go to `project`'s alternate beside it: found by its name,
    /// else `<daily_id>-<6 hex digits of the project's SHA-256>`, else the same with
    /// random digits. None only when all of those belong to other projects.
    pub async fn daily(
        &self,
        store: &dyn Store,
        daily_id: &str,
        project: &str,
        name: &str,
        now: i64,
    ) -> Result<Option<String>, StoreError> {
        let owner = self
            .ensure(store, daily_id, project, Some(name.to_string()), now)
            .await?;
        if owner == project {
            return Ok(Some(daily_id.to_string()));
        }
        let stem: String = daily_id.chars().take(ALTERNATE_PREFIX_CHARS).collect();
        let prefix = format!("{stem}-");
        if let Some(found) = store.reads().find_named_run(project, name, &prefix).await? {
            return Ok(Some(found));
        }
        tracing::warn!(
            run_id = daily_id,
            project,
            "the daily OpenTelemetry run id belongs to another project; using an alternate"
        );
        let hashed: String = Sha256::digest(project.as_bytes())[..3]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut random = [0u8; 3];
        let random = match getrandom::fill(&mut random) {
            Ok(()) => random.iter().map(|b| format!("{b:02x}")).collect(),
            Err(_) => String::new(),
        };
        for suffix in [hashed, random] {
            if suffix.is_empty() {
                continue;
            }
            let id = format!("{prefix}{suffix}");
            let owner = self
                .ensure(store, &id, project, Some(name.to_string()), now)
                .await?;
            if owner == project {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(pairs: &[(&str, Value)]) -> Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn the_project_and_run_come_from_the_resource_then_the_header() {
        let t = target(
            &attrs(&[
                ("service.name", json!("svc")),
                ("openinference.project.name", json!("oi")),
            ]),
            Some("hdr"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            t,
            Target {
                project: "oi".into(),
                run_id: Some("hdr".into())
            }
        );
        let t = target(
            &attrs(&[
                ("treeline.project", json!("tl")),
                ("service.name", json!("svc")),
                ("treeline.run_id", json!("run-1")),
            ]),
            Some("hdr"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.project, "tl");
        assert_eq!(t.run_id.as_deref(), Some("run-1"));
        let t = target(&Map::new(), None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.project, DEFAULT_PROJECT);
        assert_eq!(t.run_id, None);
        let bad = target(&attrs(&[("treeline.run_id", json!("has space"))]), None);
        assert!(bad.is_err());
    }

    #[test]
    fn dates_are_utc_calendar_days() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(day_of(1_764_420_000_000_000)), "2025-11-29");
        assert_eq!(date(day_of(951_782_400_000_000)), "2000-02-29");
        assert_eq!(date(day_of(-1)), "1969-12-31");
    }

    #[test]
    fn daily_run_ids_are_valid_and_distinct() {
        let day = day_of(1_764_420_000_000_000);
        assert_eq!(daily_run_id("my-agent", day), "my-agent-2025-11-29");
        let spaced = daily_run_id("my agent", day);
        assert!(spaced.starts_with("my-agent-") && spaced != "my-agent-2025-11-29");
        for project in ["my agent", "Ünïcode ☃", "___", &"x".repeat(128)] {
            let id = daily_run_id(project, day);
            assert!(check_id(&id, "run_id").is_ok(), "{id}");
        }
    }

    #[test]
    fn a_trace_keeps_its_first_day() {
        let runs = Runs::default();
        let before_midnight = 2 * DAY_US - 1;
        assert_eq!(runs.trace_day("p", "t", before_midnight), 1);
        assert_eq!(runs.trace_day("p", "t", before_midnight + 10), 1);
        assert_eq!(runs.trace_day("q", "t", before_midnight + 10), 2);
    }
}
