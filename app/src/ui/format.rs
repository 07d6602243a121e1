//! How numbers and times read on the page.

/// A trace's name as a list shows it: its root's, or a note that the root has not
/// arrived yet.
pub fn trace_name(t: &treeline_wire::TraceSummary) -> String {
    if t.name.is_empty() {
        "(root not received yet)".to_string()
    } else {
        t.name.clone()
    }
}

/// The span kinds in a trace, as a list shows them.
pub fn kinds(t: &treeline_wire::TraceSummary) -> String {
    t.kinds
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(" · ")
}

/// What an SDK said it dropped from a trace.
pub fn dropped(n: i64) -> String {
    if n == 1 {
        "1 span lost".into()
    } else {
        format!("{n} spans lost")
    }
}

/// A node's number of children: "1 child", "100,000 children".
pub fn children(n: i64) -> String {
    if n == 1 {
        "1 child".into()
    } else {
        format!("{} children", count(n))
    }
}

/// A trace's number of spans: "1 span", "4,096 spans".
pub fn spans(n: i64) -> String {
    if n == 1 {
        "1 span".into()
    } else {
        format!("{} spans", count(n))
    }
}

/// A count with thousands separated: 100,000.
pub fn count(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Why a trace can be missing spans, for the count's tooltip.
pub const DROPPED_TITLE: &str =
    "the SDK dropped these spans because its queue was full; the tree is incomplete";

/// A share (0..1) as a whole percent; a share above 0 never reads as "0%".
pub fn percent(share: f64) -> String {
    let pct = (share * 100.0).round();
    if share > 0.0 && pct < 1.0 {
        "<1%".into()
    } else {
        format!("{pct:.0}%")
    }
}

/// `v` to at most `places` decimals, without trailing zeros: 0.959, 5.76, 1.
pub fn decimals(v: f64, places: usize) -> String {
    let text = format!("{v:.places$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A duration in microseconds, in the largest unit that keeps it short.
pub fn duration(us: i64) -> String {
    let us = us.max(0);
    match us {
        0..=999 => format!("{us} µs"),
        // Rounded in integers, so a half always rounds up: as a float, 1.005 s is a
        // hair under 1.005 and printed 1.00.
        1_000..=999_999 => {
            let tenths = (us + 50) / 100;
            format!("{}.{} ms", tenths / 10, tenths % 10)
        }
        1_000_000..=59_999_999 => {
            let hundredths = (us + 5_000) / 10_000;
            format!("{}.{:02} s", hundredths / 100, hundredths % 100)
        }
        _ => {
            let secs = us / 1_000_000;
            if secs < 3600 {
                format!("{}m {:02}s", secs / 60, secs % 60)
            } else {
                format!("{}h {:02}m", secs / 3600, (secs % 3600) / 60)
            }
        }
    }
}

/// "5 min ago" for `ts_us`, seen at `now_us`.
pub fn relative(ts_us: i64, now_us: i64) -> String {
    let secs = (now_us - ts_us).max(0) / 1_000_000;
    match secs {
        0..=9 => "just now".into(),
        10..=59 => format!("{secs} s ago"),
        60..=3599 => format!("{} min ago", secs / 60),
        3600..=86_399 => format!("{} h ago", secs / 3600),
        _ => format!("{} d ago", secs / 86_400),
    }
}

/// `2026-11-29 14:05:09 UTC`.
pub fn timestamp(ts_us: i64) -> String {
    let secs = ts_us.div_euclid(1_000_000);
    format!(
        "{}:{:02} UTC",
        utc_minute_parts(secs.div_euclid(60), ' '),
        secs.rem_euclid(60)
    )
}

/// `2026-11-29T14:05`, a UTC minute as a `datetime-local` input holds it.
pub fn utc_minute(ts_us: i64) -> String {
    utc_minute_parts(ts_us.div_euclid(60_000_000), 'T')
}

/// Minute `mins` since 1970 as `2026-11-29<sep>14:05`.
fn utc_minute_parts(mins: i64, sep: char) -> String {
    let (days, rem) = (mins.div_euclid(1_440), mins.rem_euclid(1_440));
    let (year, month, day) = treeline_wire::civil_date(days);
    format!(
        "{year:04}-{month:02}-{day:02}{sep}{:02}:{:02}",
        rem / 60,
        rem % 60
    )
}

/// The start of a UTC minute written `2026-11-29T14:05` (or with a space), in
/// microseconds; `None` for anything else.
pub fn parse_utc_minute(text: &str) -> Option<i64> {
    let text = text.trim();
    let (date, time) = text.split_once(['T', ' '])?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (year, month, day) = (d.next()??, d.next()??, d.next()??);
    let (hour, minute) = time.split_once(':')?;
    let (hour, minute) = (
        hour.parse::<i64>().ok()?,
        minute.get(..2)?.parse::<i64>().ok()?,
    );
    // The bounds keep the arithmetic small (this parses a URL, on the server too); a
    // day past its month's end (say 02-31) rolls over, which the round trip refuses.
    let valid = (1970..=2999).contains(&year)
        && (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && (0..24).contains(&hour)
        && (0..60).contains(&minute);
    if !valid {
        return None;
    }
    let days = treeline_wire::days_from_civil(year, month, day);
    (treeline_wire::civil_date(days) == (year, month, day))
        .then(|| (days * 1_440 + hour * 60 + minute) * 60_000_000)
}

/// `text` in lower case, to match what a reader types. In the browser the browser's
/// own Unicode tables do it: Rust's would add about 4 KB gzip to the main module.
pub fn lowercase(text: &str) -> String {
    #[cfg(all(feature = "hydrate", not(feature = "ssr")))]
    {
        String::from(js_sys::JsString::from(text).to_lower_case())
    }
    #[cfg(not(all(feature = "hydrate", not(feature = "ssr"))))]
    {
        text.to_lowercase()
    }
}

/// Now, in microseconds since the epoch, on either side.
pub fn now_us() -> i64 {
    #[cfg(all(feature = "hydrate", not(feature = "ssr")))]
    {
        (js_sys::Date::now() * 1000.0) as i64
    }
    #[cfg(feature = "ssr")]
    {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0)
    }
}

/// A value as a person reads and types it: text bare, a whole number without `.0`.
pub fn note_value(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_span_is_no_spans() {
        assert_eq!(spans(1), "1 span");
        assert_eq!(spans(4096), "4,096 spans");
    }

    #[test]
    fn a_share_reads_as_a_whole_percent() {
        assert_eq!(percent(0.75), "75%");
        assert_eq!(percent(1.0 / 32.0), "3%");
        assert_eq!(percent(0.001), "<1%");
        assert_eq!(percent(0.0), "0%");
    }

    #[test]
    fn decimals_drop_their_trailing_zeros_only() {
        assert_eq!(decimals(0.95875, 3), "0.959");
        assert_eq!(decimals(10.0, 2), "10");
        assert_eq!(decimals(100.0, 0), "100");
        assert_eq!(decimals(0.0, 3), "0");
    }

    #[test]
    fn counts_group_their_thousands() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_000), "1,000");
        assert_eq!(count(100_000), "100,000");
        assert_eq!(count(-1_234_567), "-1,234,567");
        assert_eq!(count(i64::MIN), "-9,223,372,036,854,775,808");
        assert_eq!(children(1), "1 child");
        assert_eq!(children(2), "2 children");
        assert_eq!(children(100_000), "100,000 children");
    }

    #[test]
    fn durations_and_dates_read_well() {
        assert_eq!(duration(12), "12 µs");
        assert_eq!(duration(3_400), "3.4 ms");
        assert_eq!(duration(2_500_000), "2.50 s");
        assert_eq!(duration(1_000), "1.0 ms");
        assert_eq!(duration(999_960), "1000.0 ms");
        assert_eq!(duration(1_004_999), "1.00 s");
        assert_eq!(duration(1_005_000), "1.01 s");
        assert_eq!(duration(59_999_999), "60.00 s");
        assert_eq!(duration(125_000_000), "2m 05s");
        assert_eq!(timestamp(1_764_420_000_000_000), "2025-11-29 12:40:00 UTC");
        assert_eq!(relative(0, 120_000_000), "2 min ago");
    }
}
