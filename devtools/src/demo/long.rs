//! The two large traces of the agent run: a long-horizon agent of exactly N spans, and a
//! held-out evaluation whose scoring node has one child per example.

use serde_json::{json, Value};

use super::rng::{round, Rng};
use super::text::{assistant_with_calls, msg, tokens, tool_call, MODEL, MODULE_WORDS};
use super::trace::{error, none, TraceWriter, MS, SEC};
use super::Chunks;
use crate::thousands;

const BIG_LABEL: &str = "demo-grpo-agent/long-horizon";
const WIDE_LABEL: &str = "demo-grpo-agent/heldout-eval";
/// Events buffered before a chunk of a large trace is handed over.
const CHUNK: usize = 2_000;

pub(super) fn big_trace_id() -> String {
    TraceWriter::new(BIG_LABEL).trace_id
}

pub(super) fn wide_trace_id() -> String {
    TraceWriter::new(WIDE_LABEL).trace_id
}

/// The scoring node: the third span the eval trace opens.
pub(super) fn wide_node_id() -> String {
    TraceWriter::id_at(WIDE_LABEL, 2)
}

/// A coding agent that migrates one module after another until the trace holds exactly
/// `target` spans.
pub(super) fn big(t0: i64, target: u64) -> Chunks {
    let mut w = TraceWriter::new(BIG_LABEL);
    let mut r = Rng::new(BIG_LABEL);
    let root = w.open(
        None,
        "agent",
        "long-horizon agent: repository migration",
        t0,
        json!({"thread_id": "long-horizon-0",
            "attributes": {"rollout_id": "long-horizon-0001", "model": MODEL, "max_iterations": 50_000},
            "input": {"task": "Port every module of the repository to the v2 API, keeping the test suite green."}}),
    );
    let target = target.max(1);
    let mut t = t0 + SEC;
    let mut module = 0u64;
    let mut modules_done = 0u64;
    let mut done = false;
    Box::new(std::iter::from_fn(move || {
        if done {
            return None;
        }
        while w.buffered() < CHUNK && w.spans() < target {
            t = migrate_module(&mut w, &mut r, &root, module, t, target);
            module += 1;
            modules_done += 1;
        }
        if w.spans() >= target {
            w.close(
                &root,
                t + SEC,
                "ok",
                json!({"output": {"modules_migrated": modules_done, "tests": "green"},
                    "attributes": {"modules": modules_done}}),
            );
            done = true;
        }
        Some(w.take())
    }))
}

fn migrate_module(
    w: &mut TraceWriter,
    r: &mut Rng,
    root: &str,
    module: u64,
    t0: i64,
    target: u64,
) -> i64 {
    let path = format!("src/{}_{module:04}.py", r.pick(MODULE_WORDS));
    let agent = w.open(
        Some(root),
        "agent",
        &format!("module {module:04}: {path}"),
        t0,
        json!({"attributes": {"module": path}, "input": {"path": path, "goal": "port to the v2 API"}}),
    );
    let mut t = t0 + 5 * MS;
    let iterations = r.range(4, 10);
    let mut turns = 0;
    for turn in 1..=iterations {
        if w.spans() >= target {
            break;
        }
        t = iteration(w, r, &agent, &path, turn, t, target, true);
        turns = turn;
    }
    w.close(
        &agent,
        t + 5 * MS,
        "ok",
        json!({"output": {"status": "migrated", "iterations": turns}}),
    );
    t + 10 * MS
}

/// Think, call the policy, run one tool; at the top level sometimes hand the failing
/// tests to a nested fixer agent. Every span is opened only while the budget allows.
#[allow(
    clippy::too_many_arguments,
    reason = "a generator step takes each of its knobs by name"
)]
fn iteration(
    w: &mut TraceWriter,
    r: &mut Rng,
    parent: &str,
    path: &str,
    turn: i64,
    t0: i64,
    target: u64,
    top: bool,
) -> i64 {
    let it = w.open(
        Some(parent),
        "iteration",
        &format!("iteration {turn}"),
        t0,
        json!({"attributes": {"turn": turn}}),
    );
    let mut t = t0 + MS;
    let room = |w: &TraceWriter| w.spans() < target;
    if room(w) {
        w.leaf(
            &it,
            "thought",
            "think",
            t,
            t + 8 * MS,
            "ok",
            none(),
            json!({"output": format!("Next: inspect {path} and the tests that import it (turn {turn}).")}),
        );
        t += 10 * MS;
    }
    let (tool, args, ok_output) = match r.below(4) {
        0 => (
            "read_file",
            json!({ "path": path }),
            json!({"content": format!("from v1 import client\n\ndef handler(event):\n    return client.call(event)  # {path}\n")}),
        ),
        1 => (
            "grep",
            json!({"pattern": "v1\\.client", "path": "src/"}),
            json!({"matches": [format!("{path}:1"), format!("{path}:4")]}),
        ),
        2 => (
            "apply_patch",
            json!({"path": path, "diff": "-from v1 import client\n+from v2 import client\n"}),
            json!({"applied": true, "hunks": 1}),
        ),
        _ => (
            "run_tests",
            json!({"target": path.replace("src/", "tests/test_")}),
            json!({"passed": r.range(8, 40), "failed": 0}),
        ),
    };
    let call_id = format!("call_{turn}");
    if room(w) {
        let messages = vec![
            msg(
                "system",
                "You migrate Python modules to the v2 API. One tool call per turn.",
            ),
            msg(
                "user",
                &format!("Module {path}, turn {turn}. Continue the migration."),
            ),
        ];
        let reply = assistant_with_calls("", vec![tool_call(&call_id, tool, &args)]);
        let prompt = tokens(&messages);
        let completion = tokens(std::slice::from_ref(&reply));
        let end = t + 300 * MS + r.below(900) as i64 * MS;
        w.leaf(
            &it,
            "model",
            "policy.chat",
            t,
            end,
            "ok",
            json!({"input": {"messages": messages}, "attributes": {"model": MODEL}}),
            json!({"output": reply, "token_count": prompt + completion,
                "attributes": {"prompt_tokens": prompt, "completion_tokens": completion}}),
        );
        t = end + MS;
    }
    if room(w) {
        let end = t + 50 * MS + r.below(700) as i64 * MS;
        // A patch that no longer applies: rare, and the agent moves on.
        if tool == "apply_patch" && r.chance(0.01) {
            w.leaf(
                &it,
                "tool",
                tool,
                t,
                end,
                "error",
                json!({ "input": args }),
                json!({"error": error("PatchError", &format!("hunk 1 of {path} does not apply: context changed"))}),
            );
        } else {
            w.leaf(
                &it,
                "tool",
                tool,
                t,
                end,
                "ok",
                json!({ "input": args }),
                json!({ "output": ok_output }),
            );
        }
        t = end + MS;
    }
    if top && tool == "run_tests" && room(w) && r.chance(0.3) {
        let fixer = w.open(
            Some(&it),
            "agent",
            "sub-agent: test-fixer",
            t,
            json!({"attributes": {"role": "test-fixer"}, "input": {"path": path}}),
        );
        let mut ft = t + MS;
        for sub in 1..=r.range(2, 3) {
            if !room(w) {
                break;
            }
            ft = iteration(w, r, &fixer, path, sub, ft, target, false);
        }
        w.close(&fixer, ft + MS, "ok", json!({"output": {"fixed": true}}));
        t = ft + 2 * MS;
    }
    w.close(&it, t, "ok", none());
    t + MS
}

/// A held-out evaluation: the scoring node has `children` children, one per example.
pub(super) fn wide(step: i64, t0: i64, children: u64) -> Chunks {
    let mut w = TraceWriter::new(WIDE_LABEL);
    let mut r = Rng::new(WIDE_LABEL);
    let root = w.open(
        None,
        "evaluator",
        &format!("held-out eval at step {step}"),
        t0,
        json!({"step": step, "attributes": {"dataset": "heldout-math", "examples": children as i64},
            "input": {"checkpoint": format!("step-{step}"), "examples": children}}),
    );
    w.leaf(
        &root,
        "dataset",
        "load held-out set",
        t0 + 10 * MS,
        t0 + 900 * MS,
        "ok",
        json!({"input": {"name": "heldout-math", "split": "test"}}),
        json!({"output": {"rows": children}}),
    );
    let scorer = w.open(
        Some(&root),
        "evaluator",
        &format!("score {} completions", thousands(children)),
        t0 + SEC,
        json!({"attributes": {"grader": "exact_match"}}),
    );
    let mut next = 0u64;
    let mut correct = 0u64;
    let mut done = false;
    let gap = 40 * MS;
    Box::new(std::iter::from_fn(move || {
        if done {
            return None;
        }
        while w.buffered() < CHUNK && next < children {
            let i = next;
            next += 1;
            let start = t0 + 2 * SEC + i as i64 * gap;
            let end = start + 30 * MS + r.below(200) as i64 * MS;
            let answer = r.range(2, 999);
            let input = json!({"prompt_id": format!("heldout-{i:05}"),
                "completion": format!("... Final answer: {answer}")});
            let name = format!("example {i:05}");
            if r.chance(0.002) {
                w.leaf(
                    &scorer,
                    "reward",
                    &name,
                    start,
                    start + 30 * SEC,
                    "error",
                    json!({ "input": input }),
                    json!({"error": error("GraderTimeout", "the grader did not answer within 30 s")}),
                );
                continue;
            }
            let ok = r.chance(0.71);
            correct += u64::from(ok);
            let reward = if ok { 1.0 } else { 0.0 };
            w.leaf(
                &scorer,
                "reward",
                &name,
                start,
                end,
                "ok",
                json!({ "input": input }),
                json!({"output": {"reward": reward, "correct": ok}}),
            );
        }
        if next >= children {
            let end = t0 + 2 * SEC + children as i64 * gap + 31 * SEC;
            let accuracy = round(correct as f64 / children.max(1) as f64, 4);
            let summary: Value = json!({"accuracy": accuracy, "correct": correct});
            w.close(
                &scorer,
                end,
                "ok",
                json!({"output": summary, "metrics": {"accuracy": accuracy}}),
            );
            w.close(
                &root,
                end + 100 * MS,
                "ok",
                json!({"output": summary, "attributes": {"accuracy": accuracy}}),
            );
            done = true;
        }
        Some(w.take())
    }))
}
