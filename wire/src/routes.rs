//! Every route of the HTTP API, written once. The server mounts the templates; the
//! clients fill them with [`path`], which percent-encodes each parameter.

/// Where the JSON API is mounted; the templates below are relative to it.
pub const API_PREFIX: &str = "/api";
/// OTLP/HTTP traces, at the root as OpenTelemetry exporters expect.
pub const OTLP_TRACES: &str = "/v1/traces";
/// OTLP's other signals: answered with an error that says Treeline takes traces.
pub const OTLP_METRICS: &str = "/v1/metrics";
pub const OTLP_LOGS: &str = "/v1/logs";
pub const HEALTH: &str = "/healthz";

pub const PROJECTS: &str = "/projects";
/// A project's run of the day, for tracing without a run (as OTLP's spans do).
pub const PROJECT_DAILY_RUN: &str = "/projects/{project}/daily-run";
/// A project's retention policy: set (or tried, with `?dry_run=true`), or cleared.
pub const PROJECT_RETENTION: &str = "/projects/{project}/retention";
pub const RUNS: &str = "/runs";
pub const RUN: &str = "/runs/{run_id}";
pub const RUN_FINISH: &str = "/runs/{run_id}/finish";
pub const RUN_METRICS: &str = "/runs/{run_id}/metrics";
pub const TRACES: &str = "/traces";
pub const RUN_TRACES: &str = "/runs/{run_id}/traces";
pub const RUN_TRACE_EVENTS: &str = "/runs/{run_id}/traces/events";
pub const RUN_TRACE_STEPS: &str = "/runs/{run_id}/traces/steps";
/// The root-attribute keys of a run's traces, for the filter builder.
pub const RUN_TRACE_ATTRIBUTES: &str = "/runs/{run_id}/traces/attributes";
pub const TRACE: &str = "/runs/{run_id}/traces/{trace_id}";
pub const SPANS: &str = "/runs/{run_id}/traces/{trace_id}/spans";
pub const SPAN: &str = "/runs/{run_id}/traces/{trace_id}/spans/{span_id}";
/// A run's spans, one JSON line each, bodies included.
pub const RUN_EXPORT: &str = "/runs/{run_id}/export";
/// The children of two spans of a run, aligned for a diff.
pub const RUN_ALIGN: &str = "/runs/{run_id}/align";
/// Two spans' attributes and bodies, diffed.
pub const RUN_DIFF: &str = "/runs/{run_id}/diff";
/// A value's distribution over the run's steps.
pub const RUN_STATS: &str = "/runs/{run_id}/stats";
/// Samples scored together: per group its spread, per step the groups with none.
pub const RUN_GROUPS: &str = "/runs/{run_id}/groups";
/// What differs between two step ranges of a run.
pub const RUN_CHANGES: &str = "/runs/{run_id}/changes";
/// Several runs' configs and metrics side by side (not under `/runs/`, where it
/// would shadow a run of that id).
pub const COMPARE_RUNS: &str = "/compare-runs";
/// The metric keys and config paths a runs list can show as columns.
pub const RUN_FIELDS: &str = "/run-fields";
/// The traces of a run that share a trace's rollout id.
pub const TRACE_ROLLOUTS: &str = "/runs/{run_id}/traces/{trace_id}/rollouts";
/// A trace's annotations and its spans': listed, created or updated, deleted.
pub const TRACE_ANNOTATIONS: &str = "/runs/{run_id}/traces/{trace_id}/annotations";
/// Who the caller is (the dashboard shows it, with a way to sign out).
pub const SESSION: &str = "/session";

/// Every API route with its methods, for tests that must cover them all.
pub const ALL: &[(&str, &str)] = &[
    ("GET", PROJECTS),
    ("POST", PROJECT_DAILY_RUN),
    ("PUT", PROJECT_RETENTION),
    ("DELETE", PROJECT_RETENTION),
    ("GET", RUNS),
    ("GET", RUN),
    ("PUT", RUN),
    ("DELETE", RUN),
    ("POST", RUN_FINISH),
    ("GET", RUN_METRICS),
    ("POST", RUN_METRICS),
    ("GET", TRACES),
    ("GET", RUN_TRACES),
    ("POST", RUN_TRACE_EVENTS),
    ("GET", RUN_TRACE_STEPS),
    ("GET", RUN_TRACE_ATTRIBUTES),
    ("GET", TRACE),
    ("GET", SPANS),
    ("GET", SPAN),
    ("GET", RUN_EXPORT),
    ("GET", RUN_ALIGN),
    ("GET", RUN_DIFF),
    ("GET", RUN_STATS),
    ("GET", RUN_GROUPS),
    ("GET", RUN_CHANGES),
    ("GET", COMPARE_RUNS),
    ("GET", RUN_FIELDS),
    ("GET", TRACE_ROLLOUTS),
    ("GET", TRACE_ANNOTATIONS),
    ("PUT", TRACE_ANNOTATIONS),
    ("DELETE", TRACE_ANNOTATIONS),
    ("GET", SESSION),
];

/// The full path of an API route: `template` under [`API_PREFIX`], each `{name}`
/// replaced in order by the next of `params`, percent-encoded. A template with more
/// placeholders than params keeps the rest as written (a caller's bug, visible in
/// the 404 it earns rather than a panic).
pub fn path(template: &str, params: &[&str]) -> String {
    let mut out = String::with_capacity(API_PREFIX.len() + template.len() + 32);
    out.push_str(API_PREFIX);
    let mut params = params.iter();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        out.push_str(&rest[..open]);
        match params.next() {
            Some(value) => encode_into(value, &mut out),
            None => out.push_str(&rest[open..open + close + 1]),
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    encode_into(value, &mut out);
    out
}

fn encode_into(value: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 0xF)] as char);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_placeholders_in_order_and_encodes_them() {
        assert_eq!(path(RUNS, &[]), "/api/runs");
        assert_eq!(
            path(SPAN, &["run 1", "t/2", "s3"]),
            "/api/runs/run%201/traces/t%2F2/spans/s3"
        );
        assert_eq!(path(RUN_FINISH, &["r"]), "/api/runs/r/finish");
    }

    #[test]
    fn missing_params_stay_visible() {
        assert_eq!(path(TRACE, &["r"]), "/api/runs/r/traces/{trace_id}");
    }
}
