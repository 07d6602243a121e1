//! The agent runs: GRPO on math word problems with tools (groups of sibling samples per
//! prompt, nested verifier agents, a few tool failures), and a copy still in progress.

use serde_json::{json, Value};
use treeline_wire::{MetricPoint, RunFinish, RunStatus, RunUpsert};

use super::rng::{round, Rng};
use super::text::{
    assistant_with_calls, msg, task, tokens, tool_call, tool_result, Task, MODEL, SYSTEM_PROMPT,
    THOUGHTS, VERIFIER_PROMPT,
};
use super::trace::{error, none, TraceWriter, HOUR, MIN, MS, SEC};
use super::{long, Chunks, Ctx, RunPlan};

pub(super) const GRPO_RUN: &str = "demo-grpo-agent";
pub(super) const LIVE_RUN: &str = "demo-live";
const PROJECT: &str = "demo-agents";

const GRPO_STEPS: i64 = 200;
const LIVE_STEPS: i64 = 40;
pub(super) const STEP_US: i64 = 4 * MIN;
const GROUP: usize = 4;
const PROMPTS: usize = 2;
const TRACE_EVERY: i64 = 10;
/// Hours after the demo's base time that the runs start.
const GRPO_START_H: i64 = 8;
const LIVE_START_H: i64 = 45;
/// The step of the held-out evaluation with the very wide node.
const EVAL_STEP: i64 = 190;
/// Fixed evaluation prompts, traced again every `EVAL_EVERY` steps under the same
/// rollout ids, so one prompt can be compared across training.
const EVAL_PROMPTS: usize = 3;
const EVAL_EVERY: i64 = 50;

fn p_correct(step: i64) -> f64 {
    let s = step as f64;
    0.25 + 0.55 * s / (s + 60.0)
}

fn metrics(run: &str, start: i64, steps: i64) -> Vec<MetricPoint> {
    (0..steps)
        .flat_map(|step| {
            let mut r = Rng::new(&format!("{run}/metrics/{step}"));
            let s = step as f64;
            let reward = (p_correct(step) + 0.05 * r.noise()).clamp(0.0, 1.0);
            let kl = (0.001 + 0.02 * s / (s + 80.0) + 0.0008 * r.noise()).max(0.0);
            let ts = start + (step + 1) * STEP_US - 5 * SEC;
            [
                ("train/reward_mean", round(reward, 4)),
                ("train/kl", round(kl, 4)),
            ]
            .map(|(key, value)| MetricPoint {
                key: key.into(),
                step,
                value,
                ts: Some(ts),
            })
        })
        .collect()
}

fn config(seed: i64) -> Value {
    json!({"algorithm": "GRPO", "model": MODEL, "group_size": GROUP, "prompts_per_step": PROMPTS,
        "lr": 0.000001, "kl_coef": 0.04, "max_turns": 6, "tools": ["python", "verify"],
        "reward": "exact_match", "seed": seed})
}

pub(super) fn grpo(ctx: &Ctx) -> RunPlan {
    let start = ctx.base + GRPO_START_H * HOUR;
    let (big_spans, wide_children) = (ctx.options.big_trace_spans, ctx.options.wide_children);
    RunPlan {
        run_id: GRPO_RUN,
        upsert: RunUpsert {
            project: PROJECT.into(),
            name: Some("grpo-math-agent".into()),
            config: Some(config(7)),
            start_us: Some(start),
        },
        metrics: metrics(GRPO_RUN, start, GRPO_STEPS),
        notes: Vec::new(),
        events: Box::new(move || -> Chunks {
            let groups = (0..GRPO_STEPS)
                .step_by(TRACE_EVERY as usize)
                .flat_map(|step| (0..PROMPTS).map(move |p| (step, p)))
                .map(move |(step, p)| {
                    let t0 = start + step * STEP_US + (5 + 20 * p as i64) * SEC;
                    group(GRPO_RUN, step, p, t0, false)
                });
            let evals = (0..GRPO_STEPS)
                .step_by(EVAL_EVERY as usize)
                .flat_map(|step| (0..EVAL_PROMPTS).map(move |k| (step, k)))
                .map(move |(step, k)| {
                    let t0 = start + step * STEP_US + (70 + 10 * k as i64) * SEC;
                    evaluation(GRPO_RUN, step, k, t0)
                });
            let eval_t0 = start + EVAL_STEP * STEP_US + 30 * SEC;
            Box::new(
                groups
                    .chain(evals)
                    .chain(long::wide(EVAL_STEP, eval_t0, wide_children))
                    // Launched beside training, not at a step: it runs for hours.
                    .chain(long::big(start + 5 * MIN, big_spans)),
            )
        }),
        finish: Some(RunFinish {
            status: RunStatus::Finished,
            end_us: Some(start + GRPO_STEPS * STEP_US + MIN),
        }),
    }
}

pub(super) fn live(ctx: &Ctx) -> RunPlan {
    let start = ctx.base + LIVE_START_H * HOUR;
    RunPlan {
        run_id: LIVE_RUN,
        upsert: RunUpsert {
            project: PROJECT.into(),
            name: Some("grpo-math-agent-live".into()),
            config: Some(config(8)),
            start_us: Some(start),
        },
        metrics: metrics(LIVE_RUN, start, LIVE_STEPS),
        notes: Vec::new(),
        events: Box::new(move || -> Chunks {
            Box::new(
                (0..=LIVE_STEPS)
                    .step_by(TRACE_EVERY as usize)
                    .flat_map(|step| (0..PROMPTS).map(move |p| (step, p)))
                    .map(move |(step, p)| {
                        let t0 = start + step * STEP_US + (5 + 20 * p as i64) * SEC;
                        // The newest group is still being sampled.
                        group(LIVE_RUN, step, p, t0, step == LIVE_STEPS && p == 1)
                    }),
            )
        }),
        finish: None,
    }
}

/// One prompt's group of sibling samples, with the group's rewards on the root.
/// `in_progress` stops in the middle of the third sample, leaving spans open.
fn group(run: &str, step: i64, prompt: usize, t0: i64, in_progress: bool) -> Vec<Value> {
    let label = format!("{run}/group/{step}/{prompt}");
    let task = task(&format!("{run}/task/{step}/{prompt}"));
    let mut w = TraceWriter::new(&label);
    let mut r = Rng::new(&label);
    let root = w.open(
        None,
        "rollout",
        &format!("step {step} · {}", task.id),
        t0,
        json!({"step": step, "thread_id": format!("sampler-{prompt}"),
            "attributes": {"rollout_id": format!("s{step:03}-{}", task.id), "prompt_id": task.id,
                "task_family": task.family, "group_size": GROUP as i64},
            "input": {"prompt": task.question}}),
    );
    let mut rewards = Vec::new();
    let mut end = t0;
    for i in 0..GROUP {
        let correct = r.chance(p_correct(step));
        let cut = in_progress && i == 2;
        let start = t0 + 10 * MS + i as i64 * 30 * MS;
        match sample(&mut w, &mut r, &root, &task, i, start, correct, cut) {
            Some((sample_end, reward)) => {
                rewards.push(reward);
                end = end.max(sample_end);
            }
            None => return w.take(),
        }
    }
    let n = rewards.len() as f64;
    let mean = rewards.iter().sum::<f64>() / n;
    let std = (rewards.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt();
    let advantages: Vec<f64> = rewards
        .iter()
        .map(|x| round((x - mean) / (std + 1e-4), 3))
        .collect();
    let correct = rewards.iter().filter(|x| **x >= 1.0).count();
    w.close(
        &root,
        end + 40 * MS,
        "ok",
        json!({"attributes": {"reward_mean": round(mean, 3), "reward_std": round(std, 3),
                "rewards": rewards.iter().map(|x| format!("{x:.1}")).collect::<Vec<_>>(),
                "solved": format!("{correct}/{GROUP}")},
            "output": {"rewards": rewards, "advantages": advantages},
            "metrics": {"reward_mean": round(mean, 3)}}),
    );
    w.take()
}

/// One held-out prompt answered by the policy at `step`: the same prompt and rollout
/// id at every evaluation, a fresh sample each time.
fn evaluation(run: &str, step: i64, prompt: usize, t0: i64) -> Vec<Value> {
    let label = format!("{run}/eval/{step}/{prompt}");
    let task = task(&format!("{run}/eval-task/{prompt}"));
    let mut w = TraceWriter::new(&label);
    let mut r = Rng::new(&label);
    let root = w.open(
        None,
        "evaluator",
        &format!("eval {} · step {step}", task.id),
        t0,
        json!({"step": step, "thread_id": "evaluator",
            "attributes": {"rollout_id": format!("eval-{}", task.id), "prompt_id": task.id,
                "task_family": task.family, "split": "held-out"},
            "input": {"prompt": task.question}}),
    );
    let correct = r.chance(p_correct(step));
    let Some((end, reward)) = sample(
        &mut w,
        &mut r,
        &root,
        &task,
        0,
        t0 + 10 * MS,
        correct,
        false,
    ) else {
        return w.take();
    };
    w.close(
        &root,
        end + 20 * MS,
        "ok",
        json!({"attributes": {"reward": reward, "solved": reward >= 1.0},
            "output": {"reward": reward}, "metrics": {"reward": reward}}),
    );
    w.take()
}

/// A policy (or verifier) call: chat messages in, an assistant message out.
fn model(
    w: &mut TraceWriter,
    r: &mut Rng,
    parent: &str,
    name: &str,
    t: i64,
    messages: &[Value],
    reply: &Value,
) -> i64 {
    let prompt = tokens(messages);
    let completion = tokens(std::slice::from_ref(reply));
    let end = t + 250 * MS + completion * 20 * MS + r.below(300) as i64 * MS;
    w.leaf(
        parent,
        "model",
        name,
        t,
        end,
        "ok",
        json!({"input": {"messages": messages},
            "attributes": {"model": MODEL, "temperature": 1.0, "max_tokens": 1024}}),
        json!({"output": reply, "token_count": prompt + completion,
            "attributes": {"prompt_tokens": prompt, "completion_tokens": completion}}),
    );
    end
}

/// One sampled solution: iterations of think, call the policy, run a tool; sometimes a
/// nested verifier agent; then the reward. None when `cut` left it open.
#[allow(
    clippy::too_many_arguments,
    reason = "a generator step takes each of its knobs by name"
)]
fn sample(
    w: &mut TraceWriter,
    r: &mut Rng,
    parent: &str,
    task: &Task,
    index: usize,
    t0: i64,
    correct: bool,
    cut: bool,
) -> Option<(i64, f64)> {
    let agent = w.open(
        Some(parent),
        "agent",
        &format!("solver sample {index}"),
        t0,
        json!({"attributes": {"sample": index as i64, "temperature": 1.0},
            "input": {"prompt": task.question}}),
    );
    let mut messages = vec![msg("system", SYSTEM_PROMPT), msg("user", &task.question)];
    let mut t = t0 + 5 * MS;
    let mut turn = 0;
    // The first attempt sometimes uses a name it never defined; the retry fixes it.
    let mut attempts = if r.chance(0.03) {
        vec!["print(total)".to_string(), task.code.clone()]
    } else {
        vec![task.code.clone()]
    };
    let verify = r.chance(0.45);
    for code in attempts.drain(..) {
        turn += 1;
        let it = w.open(
            Some(&agent),
            "iteration",
            &format!("iteration {turn}"),
            t,
            json!({"attributes": {"turn": turn}}),
        );
        let thought = *r.pick(THOUGHTS);
        w.leaf(
            &it,
            "thought",
            "think",
            t + MS,
            t + 12 * MS,
            "ok",
            none(),
            json!({ "output": thought }),
        );
        t += 15 * MS;
        let call_id = format!("call_{index}_{turn}");
        let content = if turn == 1 {
            "Let me compute this with python."
        } else {
            "That failed because `total` was never defined. Computing the expression directly."
        };
        let reply = assistant_with_calls(
            content,
            vec![tool_call(&call_id, "python", &json!({ "code": code }))],
        );
        if cut {
            // A policy call in flight: the sample, its iteration and the call stay open.
            w.open(
                Some(&it),
                "model",
                "policy.chat",
                t,
                json!({"input": {"messages": messages}, "attributes": {"model": MODEL}}),
            );
            return None;
        }
        t = model(w, r, &it, "policy.chat", t, &messages, &reply) + 5 * MS;
        messages.push(reply);
        let tool_end = t + 40 * MS + r.below(150) as i64 * MS;
        let result = if code == task.code {
            let stdout = format!("{}\n", task.answer);
            w.leaf(
                &it,
                "tool",
                "python",
                t,
                tool_end,
                "ok",
                json!({ "input": { "code": code } }),
                json!({"output": {"stdout": stdout, "exit_code": 0}}),
            );
            stdout
        } else {
            let stderr = "Traceback (most recent call last):\n  File \"<stdin>\", line 1, in <module>\nNameError: name 'total' is not defined\n";
            w.leaf(
                &it,
                "tool",
                "python",
                t,
                tool_end,
                "error",
                json!({ "input": { "code": code } }),
                json!({"output": {"stderr": stderr, "exit_code": 1},
                    "error": error("NameError", "name 'total' is not defined")}),
            );
            stderr.to_string()
        };
        messages.push(tool_result(&call_id, "python", &result));
        t = tool_end + 5 * MS;
        w.close(&it, t, "ok", none());
        t += 5 * MS;
    }
    if verify {
        turn += 1;
        let it = w.open(
            Some(&agent),
            "iteration",
            &format!("iteration {turn}"),
            t,
            json!({"attributes": {"turn": turn}}),
        );
        let call_id = format!("call_{index}_{turn}");
        let claim = format!("{} = {}", task.expression, task.answer);
        let reply = assistant_with_calls(
            "Before answering, I'll have the verifier check the arithmetic.",
            vec![tool_call(&call_id, "verify", &json!({ "claim": claim }))],
        );
        t = model(w, r, &it, "policy.chat", t + MS, &messages, &reply) + 5 * MS;
        messages.push(reply);
        let (verdict, end) = verifier(w, r, &it, &claim, &task.expression, task.answer, t);
        messages.push(tool_result(&call_id, "verify", &verdict));
        t = end + 5 * MS;
        w.close(&it, t, "ok", none());
        t += 5 * MS;
    }
    turn += 1;
    let it = w.open(
        Some(&agent),
        "iteration",
        &format!("iteration {turn}"),
        t,
        json!({"attributes": {"turn": turn}}),
    );
    let given = if correct {
        task.answer
    } else {
        // Misreads the question: a plausible but wrong number.
        task.answer + r.range(1, 9) * if r.chance(0.5) { 1 } else { -1 }
    };
    let unit = if task.unit.is_empty() {
        String::new()
    } else {
        format!(" {}", task.unit)
    };
    let answer_text = if correct {
        format!(
            "The computation gives {}{unit}. Final answer: {given}",
            task.answer
        )
    } else {
        format!(
            "Adjusting for the wording of the question, it is {given}{unit}. Final answer: {given}"
        )
    };
    let reply = msg("assistant", &answer_text);
    t = model(w, r, &it, "policy.chat", t + MS, &messages, &reply) + 5 * MS;
    w.close(&it, t, "ok", none());
    let reward = if correct { 1.0 } else { 0.0 };
    let reward_end = t + 3 * MS;
    w.leaf(
        &agent,
        "reward",
        "reward.exact_match",
        t + MS,
        reward_end,
        "ok",
        json!({"input": {"answer": given, "reference": task.answer}}),
        json!({"output": {"reward": reward, "correct": correct, "format_ok": true},
            "metrics": {"reward": reward}}),
    );
    let end = reward_end + 2 * MS;
    w.close(
        &agent,
        end,
        "ok",
        json!({"output": {"answer": given, "turns": turn},
            "attributes": {"reward": reward, "correct": correct}}),
    );
    Some((end, reward))
}

/// A nested agent that rechecks a claim with a calculator, which sometimes times out.
fn verifier(
    w: &mut TraceWriter,
    r: &mut Rng,
    parent: &str,
    claim: &str,
    expression: &str,
    answer: i64,
    t0: i64,
) -> (String, i64) {
    let agent = w.open(
        Some(parent),
        "agent",
        "verifier",
        t0,
        json!({"input": {"claim": claim}, "attributes": {"role": "verifier"}}),
    );
    let it = w.open(
        Some(&agent),
        "iteration",
        "iteration 1",
        t0 + MS,
        json!({"attributes": {"turn": 1}}),
    );
    let mut messages = vec![
        msg("system", VERIFIER_PROMPT),
        msg("user", &format!("Check: {claim}")),
    ];
    let reply = assistant_with_calls(
        "",
        vec![tool_call(
            "call_v1",
            "calculator",
            &json!({ "expression": expression }),
        )],
    );
    let mut t = model(w, r, &it, "verifier.chat", t0 + 2 * MS, &messages, &reply) + 2 * MS;
    messages.push(reply);
    let timed_out = r.chance(0.08);
    let result = if timed_out {
        w.leaf(
            &it,
            "tool",
            "calculator",
            t,
            t + 10 * SEC,
            "error",
            json!({"input": {"expression": expression}}),
            json!({"error": error("TimeoutError", "calculator did not answer within 10 s")}),
        );
        t += 10 * SEC + MS;
        "error: timed out".to_string()
    } else {
        w.leaf(
            &it,
            "tool",
            "calculator",
            t,
            t + 8 * MS,
            "ok",
            json!({"input": {"expression": expression}}),
            json!({"output": {"result": answer}}),
        );
        t += 9 * MS;
        answer.to_string()
    };
    messages.push(tool_result("call_v1", "calculator", &result));
    let verdict = if timed_out {
        "UNVERIFIED: the calculator timed out; the claim could not be checked."
    } else {
        "VERIFIED"
    };
    t = model(
        w,
        r,
        &it,
        "verifier.chat",
        t,
        &messages,
        &msg("assistant", verdict),
    ) + MS;
    w.close(&it, t, "ok", none());
    w.close(
        &agent,
        t + MS,
        "ok",
        json!({"output": {"verdict": verdict}}),
    );
    (verdict.to_string(), t + MS)
}
