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

/// `GET …/metrics?key=`: `[step, value]` pairs ordered by step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricSeries {
    pub key: String,
    pub points: Vec<(i64, f64)>,
    pub downsampled: bool,
}

/// Keeps each bucket's min and max (in step order) so spikes survive downsampling.
pub fn downsample(points: Vec<(i64, f64)>, max_points: usize) -> (Vec<(i64, f64)>, bool) {
    let max_points = max_points.max(2);
    if points.len() <= max_points {
        return (points, false);
    }
    let buckets = max_points / 2;
    let size = points.len().div_ceil(buckets);
    let mut out = Vec::with_capacity(max_points);
    for chunk in points.chunks(size) {
        let mut lo = chunk[0];
        let mut hi = chunk[0];
        for &p in chunk {
            if p.1 < lo.1 {
                lo = p;
            }
            if p.1 > hi.1 {
                hi = p;
            }
        }
        if lo.0 == hi.0 {
            out.push(lo);
        } else if lo.0 < hi.0 {
            out.extend([lo, hi]);
        } else {
            out.extend([hi, lo]);
        }
    }
    (out, true)
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

    #[test]
    fn downsampling_keeps_extremes_and_order() {
        let mut points: Vec<(i64, f64)> = (0..10_000).map(|s| (s, (s % 7) as f64)).collect();
        points[5_000].1 = -100.0;
        points[7_001].1 = 100.0;
        let (out, downsampled) = downsample(points, 200);
        assert!(downsampled);
        assert!(out.len() <= 200);
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(out.contains(&(5_000, -100.0)) && out.contains(&(7_001, 100.0)));
    }
}
