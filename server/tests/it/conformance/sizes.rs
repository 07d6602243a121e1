//! Sizes on disk: each run's estimate follows what it stores, the runs' sizes add
//! up to the space the database uses, what ingest counts agrees with a count of
//! the stored rows, and (on SQLite, where freed pages are counted) a run's estimate
//! is near the space its deletion frees.

use crate::common::on_both;
use crate::common::{close, open, run, with, write, TestStore};
use serde_json::{json, Value};
use treeline_server::store::{RunsAsked, Store};
use treeline_wire::{MetricPoint, RunUpsert};

/// Words as a model writes them: drawn from a vocabulary of a few hundred, the
/// common ones far more often, so the text packs and indexes as prose does.
fn prose(seed: u64, words: usize) -> String {
    const SYLLABLES: [&str; 12] = [
        "ka", "lo", "mi", "ne", "ru", "ta", "vo", "pe", "da", "gu", "ri", "so",
    ];
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..words)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            let mut n = (u * u * u * 400.0) as usize + 12;
            let mut word = String::new();
            while n > 0 {
                word.push_str(SYLLABLES[n % 12]);
                n /= 12;
            }
            word
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Clone, Copy, PartialEq)]
enum Bodies {
    None,
    /// Short replies, kept as text.
    Short,
    /// Chat prompts of a few kilobytes and replies, kept packed.
    Chat,
}

/// A rollout of a root and twelve child spans, each with a dozen attributes, and
/// with `bodies` on each child.
fn rollout(trace: &str, step: i64, bodies: Bodies) -> Vec<Value> {
    let attributes = |i: i64| {
        json!({"model": "policy-7b", "temperature": 0.7, "top_p": 0.95, "seed": i,
               "env": "gridworld-v2", "episode": step, "turn": i, "retries": 0,
               "cached": false, "region": "eu-west", "host": format!("worker-{}", i % 8),
               "version": "2026.12.1"})
    };
    let mut events = vec![with(
        open(trace, "root", None, "rollout", 10),
        json!({"step": step, "attributes": attributes(0)}),
    )];
    let seed = trace
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    for c in 0..12 {
        let span = format!("c{c}");
        let mut extra = json!({"attributes": attributes(c)});
        let mut done = close(trace, &span, "ok", 12);
        match bodies {
            Bodies::None => {}
            Bodies::Short => done["output"] = json!(format!("move {c}: left")),
            Bodies::Chat => {
                let said = |n: u64, words| prose(seed ^ (n << 8) ^ c as u64, words);
                extra["input"] = json!({"messages": [
                    {"role": "system", "content": "You are a careful agent. Use the tools."},
                    {"role": "user", "content": said(1, 300)},
                ]});
                done["output"] = json!({"role": "assistant", "content": said(2, 80)});
            }
        }
        events.push(with(open(trace, &span, Some("root"), "model", 11), extra));
        events.push(done);
    }
    events.push(close(trace, "root", "ok", 13));
    events
}

async fn fill(
    s: &std::sync::Arc<dyn Store>,
    run_id: &str,
    project: &str,
    traces: i64,
    bodies: Bodies,
) {
    let up = RunUpsert {
        project: project.into(),
        name: Some(run_id.into()),
        ..Default::default()
    };
    s.upsert_run(run_id, &up, 1).await.unwrap();
    for t in 0..traces {
        write(s, run_id, &rollout(&format!("{run_id}-{t}"), t, bodies)).await;
    }
}

/// Each run's size as the runs list shows it.
async fn listed(s: &std::sync::Arc<dyn Store>) -> Vec<(String, i64)> {
    let list = s
        .reads()
        .list_runs(RunsAsked::newest(None, 100, None))
        .await
        .unwrap();
    let mut sizes: Vec<_> = list
        .runs
        .into_iter()
        .map(|r| (r.run_id, r.size_bytes))
        .collect();
    sizes.sort();
    sizes
}

/// The counted weight of the runs whose bodies are all text, as ingest left it.
/// (A store made before sizes were kept has no packed bodies: both came in the
/// same version.)
async fn counted(t: &TestStore) -> Vec<i64> {
    let mut out = Vec::new();
    for run_id in ["light", "short", "metrics only"] {
        let sql = format!("SELECT bytes FROM runs WHERE run_id = '{run_id}'");
        out.push(t.count(&sql).await);
    }
    out
}

async fn sizes_follow_what_runs_store(t: TestStore) {
    let s = &t.store;
    fill(s, "light", "p", 20, Bodies::None).await;
    fill(s, "chat", "p", 20, Bodies::Chat).await;
    fill(s, "short", "q", 20, Bodies::Short).await;
    run(s, "metrics only").await;
    let points: Vec<MetricPoint> = (0..500)
        .map(|step| MetricPoint {
            key: "reward".into(),
            step,
            value: 0.5,
            ts: None,
        })
        .collect();
    s.write_metrics("metrics only", &points).await.unwrap();

    let sizes = listed(s).await;
    let size = |id: &str| sizes.iter().find(|(r, _)| r == id).map(|(_, b)| *b);
    let (chat, light) = (size("chat").unwrap(), size("light").unwrap());
    assert!(light > 100_000, "{sizes:?}");
    assert!(chat > 2 * light, "chat bodies weigh: {sizes:?}");
    assert!(size("short").unwrap() > light, "{sizes:?}");
    assert!(size("metrics only").unwrap() > 0, "{sizes:?}");

    // The sizes add up to the space the database uses, by run and by project.
    let usage = s.reads().disk_usage(None, 10).await.unwrap();
    let total: i64 = sizes.iter().map(|(_, b)| b).sum();
    assert!(
        usage.used > 0 && (usage.used - total).abs() <= 3,
        "{usage:?} {sizes:?}"
    );
    assert_eq!(usage.runs.len(), 4);
    assert_eq!(usage.runs[0].0, "chat", "largest first: {usage:?}");
    let projects = s.reads().list_projects().await.unwrap().projects;
    let p = projects.iter().find(|p| p.name == "p").unwrap();
    assert!((p.size_bytes - chat - light).abs() <= 2, "{projects:?}");
    let detail = s.reads().get_run("chat").await.unwrap().unwrap();
    assert_eq!(detail.summary.size_bytes, chat);

    // What ingest counted event by event agrees with the stored rows counted
    // whole, as the migration counts a store made before sizes were kept.
    let at_ingest = counted(&t).await;
    let migration = if t.url.starts_with("sqlite:") {
        include_str!("../../../../store/migrations/sqlite/0020_sizes.sql")
    } else {
        include_str!("../../../../store/migrations/postgres/0020_sizes.sql")
    };
    for statement in migration.split(";\n") {
        let sql: String = statement
            .lines()
            .filter(|l| !l.trim_start().starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n");
        if sql.trim_start().starts_with("UPDATE") {
            t.execute(&sql).await;
        }
    }
    let recounted = counted(&t).await;
    for (a, b) in at_ingest.iter().zip(&recounted) {
        assert!(
            (a - b).abs() * 10 <= *b,
            "at ingest {at_ingest:?}, recounted {recounted:?}"
        );
    }

    // A deleted run's rows take space until they are removed, and say so.
    s.delete_run("chat", 5).await.unwrap();
    let usage = s.reads().disk_usage(None, 10).await.unwrap();
    assert!(usage.deleting > usage.used / 2, "{usage:?}");
    assert!(usage.runs.iter().all(|r| r.0 != "chat"), "{usage:?}");
}

on_both!(tokio::test, |t| t;
    sizes_follow_what_runs_store,
);

/// On SQLite, whose free pages are counted apart, a run's estimate is near the
/// space that deleting it frees: the measure of how close the estimates are.
#[tokio::test]
async fn a_runs_size_is_near_the_space_its_deletion_frees() {
    let t = crate::common::sqlite().await;
    let s = &t.store;
    fill(s, "light", "p", 150, Bodies::None).await;
    fill(s, "chat", "p", 150, Bodies::Chat).await;
    fill(s, "mixed", "p", 75, Bodies::Chat).await;
    for i in 150..225 {
        write(
            s,
            "mixed",
            &rollout(&format!("mixed-{i}"), i, Bodies::Short),
        )
        .await;
    }
    for run_id in ["chat", "light"] {
        let before = s.reads().disk_usage(None, 10).await.unwrap();
        let estimate = listed(s)
            .await
            .into_iter()
            .find(|(r, _)| r == run_id)
            .map(|(_, b)| b)
            .unwrap();
        s.delete_run(run_id, 5).await.unwrap();
        while let Some(step) = s.purge_step(5_000).await.unwrap() {
            if step.done {
                break;
            }
        }
        let after = s.reads().disk_usage(None, 10).await.unwrap();
        let freed = before.used - after.used;
        eprintln!("{run_id}: estimated {estimate} bytes, deletion freed {freed}");
        assert!(
            (estimate - freed).abs() * 6 <= freed,
            "{run_id}: estimated {estimate} bytes, deletion freed {freed}"
        );
    }
}

#[tokio::test]
async fn the_du_command_lists_projects_and_the_largest_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().to_string_lossy().to_string();
    let treeline = |args: &[&str]| crate::common::treeline_in(&data, args);
    let (ok, _, err) = treeline(&["du"]);
    assert!(!ok && err.contains("no Treeline database"), "{err}");
    let t = TestStore::at(&format!("sqlite:{data}/treeline.db")).await;
    fill(&t.store, "light", "p", 5, Bodies::None).await;
    fill(&t.store, "chat", "p", 5, Bodies::Chat).await;
    fill(&t.store, "elsewhere", "q", 1, Bodies::None).await;
    let sizes = listed(&t.store).await;

    let (ok, out, err) = treeline(&["du"]);
    assert!(ok, "{err}");
    assert!(out.starts_with("In use: "), "{out}");
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no line for {name}: {out}"))
            .to_string()
    };
    let chat = sizes.iter().find(|(r, _)| r == "chat").unwrap().1;
    assert!(
        line("chat").ends_with(&treeline_wire::human_bytes(chat)),
        "{out}"
    );
    // Projects and runs, each largest first.
    let at = |name: &str| out.find(&format!("\n{name} ")).unwrap();
    assert!(
        at("p") < at("q") && at("chat") < at("light") && at("light") < at("elsewhere"),
        "{out}"
    );
    assert!(line("p").contains(" 2 "), "two runs: {out}");

    let (ok, out, err) = treeline(&["du", "--project", "q", "--runs", "5"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("Largest runs of q") && !out.contains("\nchat "),
        "{out}"
    );
    let (ok, _, err) = treeline(&["du", "--project", "nope"]);
    assert!(!ok && err.contains("no project \"nope\""), "{err}");
    let (ok, _, err) = treeline(&["du", "--runs", "0"]);
    assert!(!ok && err.contains("--runs"), "{err}");
}
