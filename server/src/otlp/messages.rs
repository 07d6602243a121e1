//! Chat messages, from each convention that carries them, in the one shape the
//! inspector renders as a transcript:
//! `[{"role": "user", "content": "..."}, {"role": "assistant", "content": "",
//!   "tool_calls": [{"id": "...", "type": "function", "function": {"name": "...", "arguments": "..."}}]},
//!   {"role": "tool", "tool_call_id": "...", "content": "..."}]`.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

/// `gen_ai.input.messages` / `gen_ai.output.messages`: JSON text or already a list,
/// of messages made of typed `parts` (or OpenAI-style `content`). None when it is not
/// a list of messages, so the caller can keep it as text.
pub fn from_gen_ai(value: &Value, default_role: &str) -> Option<Value> {
    let parsed;
    let list = match value {
        Value::String(text) => {
            parsed = serde_json::from_str::<Value>(text).ok()?;
            parsed.as_array()?
        }
        Value::Array(list) => list,
        _ => return None,
    };
    let messages: Option<Vec<Value>> = list
        .iter()
        .map(|m| m.as_object().map(|m| message(m, default_role)))
        .collect();
    messages.map(Value::Array)
}

fn message(obj: &Map<String, Value>, default_role: &str) -> Value {
    let role = obj
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or(default_role);
    let mut texts: Vec<String> = Vec::new();
    let mut tool_calls = Vec::new();
    let mut tool_call_id = obj.get("tool_call_id").and_then(Value::as_str);
    if let Some(parts) = obj.get("parts").and_then(Value::as_array) {
        for part in parts {
            let kind = part.get("type").and_then(Value::as_str).unwrap_or("text");
            match kind {
                "tool_call" => tool_calls.push(tool_call(
                    part.get("id"),
                    part.get("name"),
                    part.get("arguments"),
                )),
                "tool_call_response" => {
                    tool_call_id = part.get("id").and_then(Value::as_str).or(tool_call_id);
                    if let Some(response) = part.get("response").or_else(|| part.get("result")) {
                        texts.push(text(response));
                    }
                }
                _ => match part.get("content").or_else(|| part.get("text")) {
                    Some(content) => texts.push(text(content)),
                    None => texts.push(format!("[{kind}]")),
                },
            }
        }
    } else if let Some(content) = obj.get("content") {
        texts.push(content_text(content));
    }
    if let Some(calls) = obj.get("tool_calls").and_then(Value::as_array) {
        for call in calls {
            let function = call.get("function").unwrap_or(call);
            tool_calls.push(tool_call(
                call.get("id"),
                function.get("name"),
                function.get("arguments"),
            ));
        }
    }
    let mut out = Map::new();
    out.insert("role".into(), Value::String(role.to_string()));
    out.insert("content".into(), Value::String(texts.join("\n")));
    if !tool_calls.is_empty() {
        out.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    if let Some(id) = tool_call_id {
        out.insert("tool_call_id".into(), Value::String(id.to_string()));
    }
    for field in ["name", "finish_reason"] {
        if let Some(Value::String(v)) = obj.get(field) {
            out.insert(field.into(), Value::String(v.clone()));
        }
    }
    Value::Object(out)
}

/// OpenAI-style content: a string, or a list of parts of which the text is kept.
fn content_text(content: &Value) -> String {
    match content {
        Value::Array(parts) => parts
            .iter()
            .map(|p| match p.get("text") {
                Some(t) => text(t),
                None => text(p),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => text(other),
    }
}

fn tool_call(id: Option<&Value>, name: Option<&Value>, arguments: Option<&Value>) -> Value {
    let mut call = Map::new();
    if let Some(id) = id.filter(|v| !v.is_null()) {
        call.insert("id".into(), Value::String(text(id)));
    }
    call.insert("type".into(), json!("function"));
    call.insert(
        "function".into(),
        json!({
            "name": name.map(text).unwrap_or_default(),
            "arguments": arguments.filter(|v| !v.is_null()).map(text).unwrap_or_default(),
        }),
    );
    Value::Object(call)
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[derive(Default)]
struct FlatMessage {
    role: Option<String>,
    content: Option<String>,
    contents: BTreeMap<usize, String>,
    tool_calls: BTreeMap<usize, FlatCall>,
    tool_call_id: Option<String>,
    name: Option<String>,
    finish_reason: Option<String>,
}

#[derive(Default)]
struct FlatCall {
    id: Option<Value>,
    name: Option<Value>,
    arguments: Option<Value>,
}

/// Messages flattened into attributes under `prefix` (`llm.input_messages.` of
/// OpenInference: `N.message.role`, `N.message.content`,
/// `N.message.contents.M.message_content.text`,
/// `N.message.tool_calls.M.tool_call.function.name`; or OpenLLMetry's
/// `gen_ai.prompt.`: `N.role`, `N.content`, `N.tool_calls.M.name`). Removes every
/// attribute under the prefix; None when there was none.
pub fn from_flat(attrs: &mut Map<String, Value>, prefix: &str) -> Option<Value> {
    let keys: Vec<String> = attrs
        .keys()
        .filter(|k| k.starts_with(prefix))
        .cloned()
        .collect();
    if keys.is_empty() {
        return None;
    }
    let mut messages: BTreeMap<usize, FlatMessage> = BTreeMap::new();
    for key in keys {
        let Some(value) = attrs.remove(&key) else {
            continue;
        };
        let rest = &key[prefix.len()..];
        let Some((index, field)) = split_index(rest) else {
            continue;
        };
        let field = field.strip_prefix("message.").unwrap_or(field);
        let m = messages.entry(index).or_default();
        match field {
            "role" => m.role = Some(text(&value)),
            "content" => m.content = Some(text(&value)),
            "tool_call_id" => m.tool_call_id = Some(text(&value)),
            "name" => m.name = Some(text(&value)),
            "finish_reason" => m.finish_reason = Some(text(&value)),
            _ => {
                if let Some((i, part)) = field.strip_prefix("contents.").and_then(split_index) {
                    if part == "message_content.text" || part == "text" {
                        m.contents.insert(i, text(&value));
                    }
                } else if let Some((i, part)) =
                    field.strip_prefix("tool_calls.").and_then(split_index)
                {
                    let part = part.strip_prefix("tool_call.").unwrap_or(part);
                    let part = part.strip_prefix("function.").unwrap_or(part);
                    let call = m.tool_calls.entry(i).or_default();
                    match part {
                        "id" => call.id = Some(value),
                        "name" => call.name = Some(value),
                        "arguments" => call.arguments = Some(value),
                        _ => {}
                    }
                }
            }
        }
    }
    let list = messages
        .into_values()
        .map(|m| {
            let content = m
                .content
                .unwrap_or_else(|| m.contents.into_values().collect::<Vec<_>>().join("\n"));
            let mut out = Map::new();
            out.insert(
                "role".into(),
                Value::String(m.role.unwrap_or_else(|| "user".into())),
            );
            out.insert("content".into(), Value::String(content));
            if !m.tool_calls.is_empty() {
                let calls = m
                    .tool_calls
                    .into_values()
                    .map(|c| tool_call(c.id.as_ref(), c.name.as_ref(), c.arguments.as_ref()))
                    .collect();
                out.insert("tool_calls".into(), Value::Array(calls));
            }
            for (field, value) in [
                ("tool_call_id", m.tool_call_id),
                ("name", m.name),
                ("finish_reason", m.finish_reason),
            ] {
                if let Some(v) = value {
                    out.insert(field.into(), Value::String(v));
                }
            }
            Value::Object(out)
        })
        .collect();
    Some(Value::Array(list))
}

/// `"3.message.role"` → `(3, "message.role")`.
fn split_index(rest: &str) -> Option<(usize, &str)> {
    let (index, field) = rest.split_once('.')?;
    Some((index.parse().ok()?, field))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gen_ai_parts_become_chat_messages() {
        let input = json!([
            {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
            {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
            {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "get_weather",
                "arguments": {"city": "Paris"}}]},
            {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "rainy"}]}
        ]);
        let out = from_gen_ai(&Value::String(input.to_string()), "user").unwrap_or_default();
        assert_eq!(out[0], json!({"role": "system", "content": "Be brief."}));
        assert_eq!(out[1]["content"], "Weather in Paris?");
        assert_eq!(out[2]["content"], "");
        assert_eq!(
            out[2]["tool_calls"],
            json!([{"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}])
        );
        assert_eq!(
            out[3],
            json!({"role": "tool", "content": "rainy", "tool_call_id": "call_1"})
        );
    }

    #[test]
    fn openai_style_messages_pass_through() {
        let input = json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": "hello", "finish_reason": "stop",
             "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}]);
        let out = from_gen_ai(&input, "assistant").unwrap_or_default();
        assert_eq!(out[0], json!({"role": "user", "content": "hi"}));
        assert_eq!(out[1]["finish_reason"], "stop");
        assert_eq!(out[1]["tool_calls"][0]["function"]["name"], "f");
        assert_eq!(from_gen_ai(&json!("not json"), "user"), None);
        assert_eq!(from_gen_ai(&json!({"role": "user"}), "user"), None);
    }

    #[test]
    fn openinference_flattened_messages_are_gathered_in_order() {
        let mut attrs = Map::new();
        for (k, v) in [
            ("llm.input_messages.1.message.role", json!("user")),
            (
                "llm.input_messages.1.message.contents.1.message_content.text",
                json!("second"),
            ),
            (
                "llm.input_messages.1.message.contents.0.message_content.text",
                json!("first"),
            ),
            ("llm.input_messages.0.message.role", json!("system")),
            ("llm.input_messages.0.message.content", json!("rules")),
            ("llm.output_messages.0.message.role", json!("assistant")),
            (
                "llm.output_messages.0.message.tool_calls.0.tool_call.id",
                json!("t1"),
            ),
            (
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
                json!("search"),
            ),
            (
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
                json!("{\"q\": \"x\"}"),
            ),
            ("llm.model_name", json!("gpt")),
        ] {
            attrs.insert(k.into(), v);
        }
        let input = from_flat(&mut attrs, "llm.input_messages.").unwrap_or_default();
        assert_eq!(
            input,
            json!([{"role": "system", "content": "rules"},
                   {"role": "user", "content": "first\nsecond"}])
        );
        let output = from_flat(&mut attrs, "llm.output_messages.").unwrap_or_default();
        assert_eq!(output[0]["tool_calls"][0]["id"], "t1");
        assert_eq!(
            output[0]["tool_calls"][0]["function"]["arguments"],
            "{\"q\": \"x\"}"
        );
        assert_eq!(attrs.len(), 1, "consumed attributes are removed");
        assert_eq!(from_flat(&mut attrs, "llm.input_messages."), None);
    }

    #[test]
    fn openllmetry_prompt_attributes_are_gathered() {
        let mut attrs = Map::new();
        attrs.insert("gen_ai.completion.0.role".into(), json!("assistant"));
        attrs.insert("gen_ai.completion.0.content".into(), json!("ok"));
        attrs.insert("gen_ai.completion.0.finish_reason".into(), json!("stop"));
        attrs.insert("gen_ai.completion.0.tool_calls.0.name".into(), json!("f"));
        let out = from_flat(&mut attrs, "gen_ai.completion.").unwrap_or_default();
        assert_eq!(out[0]["content"], "ok");
        assert_eq!(out[0]["finish_reason"], "stop");
        assert_eq!(out[0]["tool_calls"][0]["function"]["name"], "f");
    }
}
