//! The words of the demo: math tasks for the agent runs, chat messages, tool calls.

use serde_json::{json, Value};

use super::rng::{hash, Rng};

/// The policy model the agent runs call, in their config and their spans.
pub(super) const MODEL: &str = "policy-7b-instruct";

pub(super) const SYSTEM_PROMPT: &str = "You are a careful math assistant. Use the python tool for \
     arithmetic, check your work, and end with 'Final answer: <number>'.";

pub(super) const VERIFIER_PROMPT: &str =
    "You verify arithmetic. Recompute the claim with the calculator and answer VERIFIED or REJECTED.";

/// A word problem with a program that solves it.
pub(super) struct Task {
    pub id: String,
    pub family: &'static str,
    pub question: String,
    pub code: String,
    /// The same computation as a calculator expression.
    pub expression: String,
    pub answer: i64,
    pub unit: &'static str,
}

pub(super) fn task(label: &str) -> Task {
    let mut r = Rng::new(label);
    let (family, question, expression, answer, unit) = match r.below(6) {
        0 => {
            let (v, t) = (r.range(40, 120), r.range(2, 9));
            (
                "distance",
                format!(
                    "A train travels at {v} km/h for {t} hours. How many kilometres does it cover?"
                ),
                format!("{v} * {t}"),
                v * t,
                "km",
            )
        }
        1 => {
            let (p, d) = (r.range(5, 40), r.range(2, 20));
            (
                "shopping",
                format!(
                    "Pencils cost {p} cents each. How many pencils can you buy with {d} dollars?"
                ),
                format!("({d} * 100) // {p}"),
                d * 100 / p,
                "pencils",
            )
        }
        2 => {
            let n = r.range(10, 200);
            (
                "series",
                format!("What is the sum of the integers from 1 to {n}?"),
                format!("{n} * ({n} + 1) // 2"),
                n * (n + 1) / 2,
                "",
            )
        }
        3 => {
            let (a, b, k) = (r.range(100, 400), r.range(6, 24), r.range(2, 6));
            let c = b * k;
            (
                "recipe",
                format!("A recipe uses {a} g of flour for {b} cookies. How many grams of flour are needed for {c} cookies?"),
                format!("{a} * {c} // {b}"),
                a * k,
                "g",
            )
        }
        4 => {
            let (a, c) = (r.range(12, 60), r.range(3, 30));
            let b = r.range(1, a - 1);
            (
                "counting",
                format!("Lena has {a} apples. She gives {b} to her brother and then buys {c} more. How many apples does she have now?"),
                format!("{a} - {b} + {c}"),
                a - b + c,
                "apples",
            )
        }
        _ => {
            let (w, h) = (r.range(4, 40), r.range(3, 25));
            (
                "area",
                format!(
                    "A garden is {w} m long and {h} m wide. What is its area in square metres?"
                ),
                format!("{w} * {h}"),
                w * h,
                "m²",
            )
        }
    };
    Task {
        id: format!("{family}-{:04}", hash(label) % 10_000),
        family,
        question,
        code: format!("print({expression})"),
        expression,
        answer,
        unit,
    }
}

pub(super) fn msg(role: &str, content: &str) -> Value {
    json!({"role": role, "content": content})
}

/// An OpenAI-style tool call: the arguments are a JSON document in a string.
pub(super) fn tool_call(id: &str, name: &str, arguments: &Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}})
}

pub(super) fn assistant_with_calls(content: &str, calls: Vec<Value>) -> Value {
    json!({"role": "assistant", "content": content, "tool_calls": calls})
}

pub(super) fn tool_result(call_id: &str, name: &str, content: &str) -> Value {
    json!({"role": "tool", "tool_call_id": call_id, "name": name, "content": content})
}

/// A rough token count (four characters a token, plus framing), deterministic.
pub(super) fn tokens(messages: &[Value]) -> i64 {
    messages
        .iter()
        .map(|m| {
            let content = m["content"].as_str().map_or(0, str::len);
            let calls = m.get("tool_calls").map_or(0, |c| c.to_string().len());
            ((content + calls) / 4 + 4) as i64
        })
        .sum()
}

pub(super) const MODULE_WORDS: &[&str] = &[
    "loader",
    "sampler",
    "buffer",
    "policy",
    "critic",
    "schedule",
    "metrics",
    "replay",
    "tokenize",
    "collate",
    "optim",
    "checkpoint",
    "rollout",
    "reward",
    "config",
    "logging",
];

pub(super) const THOUGHTS: &[&str] = &[
    "The numbers are small, but I'll use python anyway so the arithmetic is checked.",
    "I should restate the quantities first, then compute.",
    "This is a single multiplication or sum; compute it, then double-check the units.",
    "Let me set up the expression carefully before running it.",
];
