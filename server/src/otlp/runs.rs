//! Which run and project an OTLP resource's spans belong to. A run is named by the
//! resource attribute `treeline.run_id` or the `Treeline-Run-Id` header; otherwise
//! each project gets one run per UTC day, created on first use, so an exporter
//! configured with nothing but the endpoint URL works.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use treeline_wire::{check_id, check_project, Invalid, RunUpsert};

use crate::store::{Store, StoreError};

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
    format!("{project} {} (OpenTelemetry)", date(day))
}

/// Bounds for the in-memory caches below; past them the oldest generation is dropped.
const MAX_KNOWN_RUNS: usize = 10_000;
const MAX_TRACES: usize = 200_000;

/// What this server remembers between exports: the runs known to exist (to skip a
/// lookup per request) and the day each recent trace was given, so a trace whose
/// spans straddle midnight, or whose export is retried, stays in one daily run.
#[derive(Default)]
pub struct Runs {
    known: Mutex<HashSet<String>>,
    traces: Mutex<(HashMap<String, i64>, HashMap<String, i64>)>,
}

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

    /// Makes sure the run exists, creating it in `project` when it does not. An
    /// existing run keeps its own project and name.
    pub async fn ensure(
        &self,
        store: &dyn Store,
        run_id: &str,
        project: &str,
        name: Option<String>,
        now: i64,
    ) -> Result<(), StoreError> {
        if self.known.lock().is_ok_and(|k| k.contains(run_id)) {
            return Ok(());
        }
        if store.reads().get_run(run_id).await?.is_none() {
            let run = RunUpsert {
                project: project.to_string(),
                name,
                ..Default::default()
            };
            match store.upsert_run(run_id, &run, now).await {
                // Created meanwhile by another request, in another project: use it.
                Ok(_) | Err(StoreError::ProjectConflict { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        if let Ok(mut known) = self.known.lock() {
            if known.len() >= MAX_KNOWN_RUNS {
                known.clear();
            }
            known.insert(run_id.to_string());
        }
        Ok(())
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
