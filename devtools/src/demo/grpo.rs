//! A GRPO run logged the way real trainers log it: flat, one short trace per sample
//! (200 steps × 32 prompts × 8 samples = 51,200 traces of 4–5 spans), the group only a
//! root attribute. Its story: rewards rise with training; the easy prompts (the
//! arithmetic family and half of algebra) saturate late, so more and more groups have
//! eight equal rewards and teach nothing; and at steps 120–139 the code family's python
//! sandbox times out, failing most of those samples at reward 0 and denting the mean.

use serde_json::{json, Value};
use treeline_wire::annotations::AnnotationPut;
use treeline_wire::{MetricPoint, RunFinish, RunStatus, RunUpsert};

use super::rng::{ordered_trace_id, round, Rng};
use super::text::MODEL;
use super::trace::{error, TraceWriter, HOUR, MIN, MS, SEC};
use super::{Chunks, Ctx, RunPlan};

pub(super) const GRPO_FLAT_RUN: &str = "demo-grpo-flat";
const PROJECT: &str = "demo-agents";

const STEPS: i64 = 200;
const PROMPTS: usize = 32;
const GROUP: usize = 8;
const STEP_US: i64 = 3 * MIN;
/// Hours after the demo's base time that the run starts.
const START_H: i64 = 28;
/// Steps whose code-family sandbox calls time out.
const TIMEOUTS: (i64, i64) = (120, 139);
/// The share of code-family samples in the stretch whose sandbox call times out.
const TIMEOUT_SHARE: f64 = 0.8;
const SANDBOX_TIMEOUT_US: i64 = 30 * SEC;

const FAMILIES: [&str; 4] = ["arithmetic", "algebra", "geometry", "code"];

const CODE_TASKS: [(&str, &str); 8] = [
    (
        "is_palindrome",
        "Write is_palindrome(s), ignoring case and spaces.",
    ),
    ("fib", "Write fib(n), the n-th Fibonacci number."),
    ("flatten", "Write flatten(xs) for arbitrarily nested lists."),
    (
        "word_count",
        "Write word_count(text) returning a dict of counts.",
    ),
    (
        "merge_sorted",
        "Write merge_sorted(a, b) for two sorted lists.",
    ),
    ("rle", "Write rle(s), the run-length encoding of a string."),
    ("is_prime", "Write is_prime(n) for n up to 10**9."),
    (
        "two_sum",
        "Write two_sum(nums, target) returning two indices.",
    ),
];

/// One of the run's fixed prompts, asked again at every step.
struct Prompt {
    id: String,
    family: &'static str,
    text: String,
    /// What `tool.python` runs for it.
    code: String,
    /// The function a code prompt asks for; empty for math.
    func: &'static str,
    /// The right answer (math), or the number of unit tests (code).
    answer: i64,
    /// Learned early and saturating late.
    easy: bool,
    /// The chance of a right answer at step 0.
    base: f64,
}

fn prompts(count: usize) -> Vec<Prompt> {
    (0..count).map(prompt).collect()
}

fn prompt(k: usize) -> Prompt {
    let mut r = Rng::new(&format!("{GRPO_FLAT_RUN}/prompt/{k}"));
    let family = FAMILIES[k % FAMILIES.len()];
    let mut func = "";
    let (text, code, answer) = match family {
        "arithmetic" => {
            let (a, b) = (r.range(12, 99), r.range(12, 99));
            (
                format!("What is {a} × {b}?"),
                format!("print({a} * {b})"),
                a * b,
            )
        }
        "algebra" => {
            let (a, x, b) = (r.range(2, 9), r.range(-12, 12), r.range(1, 30));
            let c = a * x + b;
            (
                format!("Solve {a}x + {b} = {c} for x."),
                format!("print(({c} - {b}) // {a})"),
                x,
            )
        }
        "geometry" if r.chance(0.5) => {
            let (w, h) = (r.range(3, 40), r.range(3, 40));
            (
                format!("A rectangle is {w} m by {h} m. What is its perimeter?"),
                format!("print(2 * ({w} + {h}))"),
                2 * (w + h),
            )
        }
        "geometry" => {
            let n = r.range(2, 12);
            let (a, b) = (3 * n, 4 * n);
            (
                format!("A right triangle has legs {a} and {b}. How long is the hypotenuse?"),
                format!("print(int(math.hypot({a}, {b})))"),
                5 * n,
            )
        }
        _ => {
            let (name, text) = CODE_TASKS[k / FAMILIES.len() % CODE_TASKS.len()];
            func = name;
            let tests = 4 + (k / FAMILIES.len()) as i64 % 3;
            (
                text.to_string(),
                format!("run_tests({name}, n={tests})"),
                tests,
            )
        }
    };
    let easy = family == "arithmetic" || (family == "algebra" && k % 8 == 1);
    Prompt {
        id: format!("p{k:02}"),
        family,
        text,
        code,
        func,
        answer,
        easy,
        base: if easy { 0.5 } else { 0.08 + 0.2 * r.f64() },
    }
}

/// The chance of a right answer: rising with training, to near certainty on easy prompts.
fn p_correct(step: i64, prompt: &Prompt) -> f64 {
    let s = step as f64;
    let learned = s / (s + 60.0);
    if prompt.easy {
        (prompt.base + 0.75 * learned).min(0.995)
    } else {
        prompt.base + 0.6 * learned
    }
}

fn timeout_stretch(step: i64) -> bool {
    (TIMEOUTS.0..=TIMEOUTS.1).contains(&step)
}

/// What happened to one sample; drawn apart from the trace's timings so the metrics
/// can be computed from the same draws without writing the traces.
struct Outcome {
    correct: bool,
    reward: f64,
    /// Unit tests passed (code), or the answer given (math).
    given: i64,
    timed_out: bool,
    searched: bool,
    response_tokens: i64,
}

fn outcome(step: i64, prompt: &Prompt, index: usize) -> Outcome {
    let mut r = Rng::new(&format!(
        "{GRPO_FLAT_RUN}/outcome/{step}/{}/{index}",
        prompt.id
    ));
    let correct = r.chance(p_correct(step, prompt));
    let code = prompt.family == "code";
    let timed_out = r.chance(TIMEOUT_SHARE) && code && timeout_stretch(step);
    let searched = r.chance(match prompt.family {
        "arithmetic" => 0.05,
        "code" => 0.3,
        _ => 0.4,
    });
    let (lo, hi) = match prompt.family {
        "arithmetic" => (60, 180),
        "algebra" => (120, 400),
        "geometry" => (150, 450),
        _ => (200, 700),
    };
    let response_tokens = r.range(lo, hi);
    // Partial credit: unit tests passed for code, the right setup for math.
    let (given, partial) = if code {
        let passed = if correct {
            prompt.answer
        } else {
            r.range(0, prompt.answer - 1)
        };
        (passed, passed as f64 / prompt.answer as f64)
    } else if correct {
        (prompt.answer, 1.0)
    } else {
        let off = r.range(1, 9) * if r.chance(0.5) { 1 } else { -1 };
        (prompt.answer + off, if r.chance(0.25) { 0.5 } else { 0.0 })
    };
    Outcome {
        correct,
        reward: if timed_out { 0.0 } else { round(partial, 2) },
        given,
        timed_out,
        searched,
        response_tokens,
    }
}

/// The per-step numbers a trainer logs, from the same draws as the traces.
struct StepStats {
    reward_mean: f64,
    zero_spread_share: f64,
    response_tokens_mean: f64,
}

fn step_stats(step: i64, prompts: &[Prompt]) -> StepStats {
    let (mut sum, mut tokens, mut flat) = (0.0, 0, 0);
    for prompt in prompts {
        let rewards: Vec<f64> = (0..GROUP)
            .map(|i| {
                let o = outcome(step, prompt, i);
                tokens += o.response_tokens;
                o.reward
            })
            .collect();
        sum += rewards.iter().sum::<f64>();
        flat += usize::from(rewards.iter().all(|x| *x == rewards[0]));
    }
    let samples = (prompts.len() * GROUP) as f64;
    StepStats {
        reward_mean: sum / samples,
        zero_spread_share: flat as f64 / prompts.len() as f64,
        response_tokens_mean: tokens as f64 / samples,
    }
}

fn metrics(start: i64, count: usize) -> Vec<MetricPoint> {
    let prompts = prompts(count);
    (0..STEPS)
        .flat_map(|step| {
            let stats = step_stats(step, &prompts);
            let mut r = Rng::new(&format!("{GRPO_FLAT_RUN}/metrics/{step}"));
            let s = step as f64;
            let kl = (0.001 + 0.03 * s / (s + 80.0) + 0.0008 * r.noise()).max(0.0);
            let ts = start + (step + 1) * STEP_US - 5 * SEC;
            [
                ("train/reward_mean", round(stats.reward_mean, 4)),
                ("train/zero_spread_share", round(stats.zero_spread_share, 4)),
                (
                    "train/response_tokens_mean",
                    round(stats.response_tokens_mean, 1),
                ),
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

pub(super) fn grpo_flat(ctx: &Ctx) -> RunPlan {
    let start = ctx.base + START_H * HOUR;
    let count = ctx.options.flat_prompts.clamp(1, PROMPTS);
    RunPlan {
        run_id: GRPO_FLAT_RUN,
        upsert: RunUpsert {
            project: PROJECT.into(),
            name: Some("grpo-flat-math-code".into()),
            config: Some(
                json!({"algorithm": "GRPO", "model": MODEL, "group_size": GROUP,
                "prompts_per_step": count, "total_steps": STEPS, "lr": 0.000001,
                "kl_coef": 0.04, "tools": ["python", "search"], "reward": "judge",
                "sandbox_timeout_s": SANDBOX_TIMEOUT_US / SEC, "seed": 11}),
            ),
            start_us: Some(start),
        },
        metrics: metrics(start, count),
        notes: notes(count),
        events: Box::new(move || -> Chunks {
            let prompts = prompts(count);
            Box::new(
                (0..STEPS)
                    .flat_map(move |step| (0..count).map(move |k| (step, k)))
                    .flat_map(|(step, k)| (0..GROUP).map(move |i| (step, k, i)))
                    .map(move |(step, k, i)| {
                        let offset = sample_offset(step, k, i);
                        sample(step, &prompts[k], i, start + offset, offset / MS)
                    }),
            )
        }),
        finish: Some(RunFinish {
            status: RunStatus::Finished,
            end_us: Some(start + STEPS * STEP_US + MIN),
        }),
    }
}

/// When sample `i` of prompt `k` at `step` starts, after the run's start.
fn sample_offset(step: i64, k: usize, i: usize) -> i64 {
    step * STEP_US + 2 * SEC + k as i64 * 150 * MS + i as i64 * 12 * MS
}

fn sample_label(step: i64, prompt: &Prompt, index: usize) -> String {
    format!("{GRPO_FLAT_RUN}/sample/{step}/{}/{index}", prompt.id)
}

/// The step whose samples the team went through, in the middle of the timeouts.
const REVIEWED_STEP: i64 = 130;

/// What the team left on the reviewed step: an LLM judge's `quality` (1–5, by
/// code) on every sample, and a person's `label` on the code family's, which
/// names the sandbox timeouts.
fn notes(count: usize) -> Vec<(String, AnnotationPut)> {
    let step = REVIEWED_STEP;
    let mut out = Vec::new();
    for (k, prompt) in prompts(count).iter().enumerate() {
        for i in 0..GROUP {
            let o = outcome(step, prompt, i);
            let ms = sample_offset(step, k, i) / MS;
            let trace = ordered_trace_id(
                u64::try_from(ms).unwrap_or_default(),
                &sample_label(step, prompt, i),
            );
            let quality = if o.timed_out {
                1.0
            } else {
                1.0 + (4.0 * o.reward).round()
            };
            out.push((
                trace.clone(),
                AnnotationPut {
                    name: "quality".into(),
                    value: json!(quality),
                    source: Some("code".into()),
                    ..AnnotationPut::default()
                },
            ));
            if prompt.family != "code" {
                continue;
            }
            let (label, comment) = if o.timed_out {
                (
                    "sandbox timeout",
                    Some("The answer was never tested: the sandbox hit its 30 s limit."),
                )
            } else if o.correct {
                ("fine", None)
            } else {
                ("wrong answer", None)
            };
            out.push((
                trace,
                AnnotationPut {
                    name: "label".into(),
                    value: json!(label),
                    comment: comment.map(str::to_string),
                    source: Some("person".into()),
                    ..AnnotationPut::default()
                },
            ));
        }
    }
    out
}

/// One sample's trace: generate, maybe search, run python, judge. Its id rises with
/// `ms`, its start in milliseconds since the run's, as a trainer's SDK writes it.
fn sample(step: i64, prompt: &Prompt, index: usize, t0: i64, ms: i64) -> Vec<Value> {
    let label = sample_label(step, prompt, index);
    let o = outcome(step, prompt, index);
    let mut w = TraceWriter::ordered(u64::try_from(ms).unwrap_or_default(), &label);
    let mut r = Rng::new(&label);
    let root = w.open(
        None,
        "rollout",
        &format!("sample {}·{index}", prompt.id),
        t0,
        json!({"step": step,
            "attributes": {"group_id": format!("s{step:03}-{}", prompt.id), "prompt_id": prompt.id,
                "task_family": prompt.family, "sample": index as i64}}),
    );
    let code = prompt.family == "code";
    let text = if code {
        format!(
            "def {}(...): ...  # {} lines",
            prompt.func,
            4 + o.response_tokens / 40
        )
    } else {
        format!("Final answer: {}", o.given)
    };
    let mut t = t0 + 400 * MS + o.response_tokens * 12 * MS + r.below(400) as i64 * MS;
    w.leaf(
        &root,
        "model",
        "policy.generate",
        t0 + MS,
        t,
        "ok",
        json!({"input": {"prompt": prompt.text}}),
        json!({"output": {"text": text}, "token_count": 40 + o.response_tokens}),
    );
    if o.searched {
        let end = t + 300 * MS + r.below(600) as i64 * MS;
        let query = if code {
            "python stdlib docs"
        } else {
            "formula reference"
        };
        w.leaf(
            &root,
            "tool",
            "tool.search",
            t + 5 * MS,
            end,
            "ok",
            json!({"input": {"query": query}}),
            json!({"output": {"hits": r.range(1, 5)}}),
        );
        t = end;
    }
    let python_start = t + 5 * MS;
    if o.timed_out {
        t = python_start + SANDBOX_TIMEOUT_US;
        w.leaf(
            &root,
            "tool",
            "tool.python",
            python_start,
            t,
            "error",
            json!({"input": {"code": prompt.code}}),
            json!({"error": error("TimeoutError", "sandbox did not finish within 30 s")}),
        );
    } else {
        let run = if code {
            SEC + r.below(3_000) as i64 * MS
        } else {
            80 * MS + r.below(300) as i64 * MS
        };
        t = python_start + run;
        let output = if code {
            json!({"passed": o.given, "total": prompt.answer})
        } else {
            json!({"stdout": prompt.answer.to_string()})
        };
        w.leaf(
            &root,
            "tool",
            "tool.python",
            python_start,
            t,
            "ok",
            json!({"input": {"code": prompt.code}}),
            json!({ "output": output }),
        );
    }
    let judge_end = t + 45 * MS + r.below(150) as i64 * MS;
    let verdict = if o.timed_out {
        "tool timeout"
    } else if o.correct {
        "correct"
    } else if o.reward > 0.0 {
        "partial"
    } else {
        "wrong"
    };
    w.leaf(
        &root,
        "reward",
        "reward.judge",
        t + 5 * MS,
        judge_end,
        "ok",
        json!({"input": {"answer": o.given, "reference": prompt.answer}}),
        json!({"output": {"reward": o.reward, "verdict": verdict}, "metrics": {"reward": o.reward}}),
    );
    let attributes = json!({"reward": o.reward, "response_tokens": o.response_tokens});
    if o.timed_out {
        w.close(
            &root,
            judge_end + 5 * MS,
            "error",
            json!({"attributes": attributes,
                "error": error("TimeoutError", "tool.python timed out; the sample scored 0")}),
        );
    } else {
        w.close(
            &root,
            judge_end + 5 * MS,
            "ok",
            json!({ "attributes": attributes }),
        );
    }
    w.take()
}

#[cfg(test)]
mod tests {
    use super::super::Options;
    use super::*;
    use std::collections::{HashMap, HashSet};

    /// The share of groups in `steps` whose eight rewards are all equal.
    fn zero_spread(groups: &HashMap<String, (i64, Vec<f64>)>, steps: (i64, i64)) -> f64 {
        let inside: Vec<&Vec<f64>> = groups
            .values()
            .filter(|(step, _)| (steps.0..=steps.1).contains(step))
            .map(|(_, rewards)| rewards)
            .collect();
        let flat = inside
            .iter()
            .filter(|r| r.iter().all(|x| *x == r[0]))
            .count();
        flat as f64 / inside.len().max(1) as f64
    }

    #[test]
    fn the_flat_run_has_one_short_trace_per_sample_and_its_story() {
        let plan = grpo_flat(&Ctx::new(1_800_000_000_000_000, &Options::full()));
        let (mut traces, mut events, mut longest) = (0usize, 0usize, 0usize);
        let mut groups: HashMap<String, (i64, Vec<f64>)> = HashMap::new();
        let mut prompt_ids = HashSet::new();
        let mut families = HashSet::new();
        let mut rewards_by_step = vec![Vec::new(); STEPS as usize];
        let (mut timeouts, mut errored_roots) = (0, 0);
        for chunk in (plan.events)() {
            traces += 1;
            events += chunk.len();
            longest = longest.max(chunk.len());
            let root = &chunk[0];
            let trace = &root["trace_id"];
            assert!(
                chunk.iter().all(|e| e["trace_id"] == *trace),
                "one trace a chunk"
            );
            assert!(root["op"] == "open" && root["parent_span_id"].is_null());
            assert_eq!(root["kind"], "rollout");
            let opens = chunk.iter().filter(|e| e["op"] == "open").count();
            assert!((4..=5).contains(&opens), "{opens} spans: {root}");
            let step = root["step"].as_i64().expect("step");
            let attrs = &root["attributes"];
            let group = attrs["group_id"].as_str().expect("group_id");
            let prompt = attrs["prompt_id"].as_str().expect("prompt_id");
            let family = attrs["task_family"].as_str().expect("task_family");
            assert!(FAMILIES.contains(&family), "{family}");
            assert_eq!(group, format!("s{step:03}-{prompt}"));
            prompt_ids.insert(prompt.to_string());
            families.insert(family.to_string());
            let close = chunk
                .iter()
                .find(|e| e["op"] == "close" && e["span_id"] == root["span_id"])
                .expect("the root closes");
            let reward = close["attributes"]["reward"].as_f64().expect("reward");
            assert!((0.0..=1.0).contains(&reward), "{reward}");
            let tokens = close["attributes"]["response_tokens"].as_i64();
            assert!(tokens.is_some_and(|t| t > 0), "{close}");
            let kinds: HashMap<&Value, (&Value, &Value)> = chunk
                .iter()
                .filter(|e| e["op"] == "open")
                .map(|e| (&e["span_id"], (&e["kind"], &e["name"])))
                .collect();
            let mut timed_out = false;
            for e in chunk.iter().filter(|e| e["op"] == "close") {
                if e["status"] != "error" || e["span_id"] == root["span_id"] {
                    continue;
                }
                let (kind, name) = kinds[&e["span_id"]];
                assert!(kind == "tool" && name == "tool.python", "{e}");
                assert!(family == "code" && timeout_stretch(step), "{step} {family}");
                assert_eq!(e["error"]["type"], "TimeoutError");
                timed_out = true;
            }
            let root_error = close["status"] == "error";
            assert_eq!(root_error, timed_out, "{close}");
            if timed_out {
                assert_eq!(reward, 0.0);
                timeouts += 1;
            }
            errored_roots += usize::from(root_error);
            groups
                .entry(group.to_string())
                .or_insert_with(|| (step, Vec::new()))
                .1
                .push(reward);
            rewards_by_step[step as usize].push(reward);
        }
        assert_eq!(traces, STEPS as usize * PROMPTS * GROUP);
        assert_eq!(groups.len(), STEPS as usize * PROMPTS);
        assert!(groups.values().all(|(_, r)| r.len() == GROUP));
        assert_eq!(prompt_ids.len(), PROMPTS);
        assert_eq!(families.len(), FAMILIES.len());
        assert!(events * 10 < traces * 120, "{events} events");
        assert!(longest <= 10, "{longest}");
        // 20 steps × 8 code prompts × 8 samples, most of them timed out.
        let code_in_stretch = (TIMEOUTS.1 - TIMEOUTS.0 + 1) as usize * PROMPTS / 4 * GROUP;
        assert!(timeouts * 10 > code_in_stretch * 7, "{timeouts}");
        assert!(timeouts * 10 < code_in_stretch * 9, "{timeouts}");
        assert_eq!(errored_roots, timeouts);

        let early = zero_spread(&groups, (0, 39));
        let late = zero_spread(&groups, (STEPS - 40, STEPS - 1));
        assert!(
            early < 0.1 && late > 0.3 && late > 3.0 * early,
            "{early} → {late}"
        );
        let mean = |from: i64, to: i64| {
            let r: Vec<f64> = (from..=to)
                .flat_map(|s| rewards_by_step[s as usize].clone())
                .collect();
            r.iter().sum::<f64>() / r.len() as f64
        };
        let before = mean(TIMEOUTS.0 - 20, TIMEOUTS.0 - 1);
        let during = mean(TIMEOUTS.0, TIMEOUTS.1);
        let after = mean(TIMEOUTS.1 + 1, TIMEOUTS.1 + 20);
        assert!(
            during < before - 0.08 && during < after - 0.08,
            "{before} {during} {after}"
        );
        assert!(mean(STEPS - 20, STEPS - 1) > mean(0, 19) + 0.25);
        // The logged metrics are the traces' own numbers.
        for p in plan.metrics.iter().filter(|p| p.key == "train/reward_mean") {
            let m = mean(p.step, p.step);
            assert!(
                (p.value - m).abs() < 1e-3,
                "step {}: {} vs {m}",
                p.step,
                p.value
            );
        }
        for p in plan
            .metrics
            .iter()
            .filter(|p| p.key == "train/zero_spread_share")
        {
            let share = zero_spread(&groups, (p.step, p.step));
            assert_eq!(p.value, round(share, 4), "step {}", p.step);
        }
    }
}
