use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Invalid;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricPoint {
    pub key: String,
    pub step: i64,
    pub value: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<i64>,
}

/// Parses one point of `POST …/metrics`, naming the bad field.
pub fn parse_metric_point(value: &Value) -> Result<MetricPoint, Invalid> {
    let obj = value
        .as_object()
        .ok_or_else(|| Invalid::new("invalid_point", "point must be a JSON object"))?;
    crate::limits::check_no_nul(value, "")?;
    let key = match obj.get("key") {
        Some(Value::String(k)) if !k.is_empty() && k.len() <= 256 => k.clone(),
        _ => {
            return Err(Invalid::new(
                "invalid_key",
                "key must be a string of 1-256 bytes",
            ))
        }
    };
    let step = match obj.get("step").and_then(Value::as_i64) {
        Some(s) if s >= 0 => s,
        _ => {
            return Err(Invalid::new(
                "invalid_step",
                "step must be a non-negative integer",
            ))
        }
    };
    let value = match obj.get("value").and_then(Value::as_f64) {
        Some(v) if v.is_finite() => v,
        _ => {
            return Err(Invalid::new(
                "invalid_value",
                "value must be a finite number",
            ))
        }
    };
    let ts = match obj.get("ts") {
        None | Some(Value::Null) => None,
        Some(t) => Some(t.as_i64().ok_or_else(|| {
            Invalid::new("invalid_field", "ts must be an integer (microseconds)")
        })?),
    };
    Ok(MetricPoint {
        key,
        step,
        value,
        ts,
    })
}

/// `GET …/metrics?key=`: `[step, value]` pairs ordered by step, with each point's
/// logged time (`ts`, microseconds; null for a point logged without one) at the same
/// index. Past `max_points`, each of the step range's buckets keeps its smallest and
/// largest value, so a spike survives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricSeries {
    pub key: String,
    pub points: Vec<(i64, f64)>,
    #[serde(default)]
    pub ts: Vec<Option<i64>>,
    pub downsampled: bool,
    /// Points stored in the range asked for (more than `points.len()` when
    /// downsampled).
    #[serde(default)]
    pub stored: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn points_are_checked_field_by_field() {
        assert!(parse_metric_point(&json!({"key": "loss", "step": 1, "value": 0.5})).is_ok());
        let err = parse_metric_point(&json!({"key": "loss", "step": -1, "value": 0.5}));
        assert_eq!(err.unwrap_err().code, "invalid_step");
        let err = parse_metric_point(&json!({"key": "loss", "step": 1, "value": "NaN"}));
        assert!(err.unwrap_err().message.contains("value"));
    }
}
