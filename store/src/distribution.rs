//! The arithmetic of a distribution over steps, apart from any database: round step
//! buckets, round histogram bins shared by every bucket, deciles, and the split into
//! the most common values and the rest.

use std::collections::HashMap;

use treeline_wire::filter::{Field, Op, Test, TraceFilter, Value};
use treeline_wire::stats::{StatBucket, StatSeries, Stats, MAX_SPLIT_VALUES};

/// The traces of one step that share a value of the split attribute (or all of the
/// step's, unsplit): their values.
pub(crate) struct Cell {
    pub step: i64,
    pub label: Option<String>,
    pub values: Vec<f64>,
}

/// The smallest of 1, 2 and 5 times a power of ten that is at least `x` (> 0).
pub(crate) fn nice_ceil(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&w| w >= x * (1.0 - 1e-12))
        .unwrap_or(10.0 * power)
}

/// The next round width after `w`: 1 → 2 → 5 → 10.
fn next_nice(w: f64) -> f64 {
    nice_ceil(w * 1.000_001)
}

/// Steps per bucket: round, and few enough that `[min, max]`, cut at its multiples,
/// makes at most `buckets` buckets.
pub(crate) fn bucket_steps(min: i64, max: i64, buckets: usize) -> i64 {
    let span = max.saturating_sub(min).saturating_add(1).max(1);
    let mut w = nice_ceil(span as f64 / buckets.max(1) as f64).max(1.0) as i64;
    loop {
        let count = max.div_euclid(w) - min.div_euclid(w) + 1;
        if count <= buckets as i64 || w >= span {
            return w;
        }
        w = next_nice(w as f64) as i64;
    }
}

/// The decimals that write `width`'s multiples exactly.
fn decimals(width: f64) -> i32 {
    (-width.log10().floor()).max(0.0) as i32
}

fn round_to(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    let r = (x * scale).round() / scale;
    // -0.0 would print as "-0" in a filter.
    if r == 0.0 {
        0.0
    } else {
        r
    }
}

/// At most `bins` bins of a round width covering `[min, max]`, as their edges:
/// integer widths when every value is an integer.
pub(crate) fn bin_edges(min: f64, max: f64, bins: usize, integers: bool) -> Vec<f64> {
    // A range past f64's (values near ±1.8e308) has no round width: one bin.
    if max <= min || !(max - min).is_finite() {
        return vec![min, max];
    }
    let mut width = nice_ceil((max - min) / bins.max(1) as f64);
    if integers {
        width = width.max(1.0);
    }
    loop {
        let lo = (min / width).floor() * width;
        let n = ((max - lo) / width).floor() as usize + 1;
        if n <= bins.max(1) {
            let d = decimals(width);
            return (0..=n)
                .map(|i| round_to(lo + i as f64 * width, d))
                .collect();
        }
        width = next_nice(width);
    }
}

/// The bin of `value`: `edges[i] <= value < edges[i + 1]`, the last bin closed.
pub(crate) fn bin_of(edges: &[f64], value: f64) -> usize {
    let inner = &edges[1..edges.len().saturating_sub(1).max(1)];
    inner.partition_point(|&e| e <= value)
}

/// The `q` quantile of sorted `values`, interpolated between the two nearest ranks.
pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let pos = q * (n - 1) as f64;
            let lo = pos.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
        }
    }
}

fn bucket(first_step: i64, last_step: i64, mut values: Vec<f64>, edges: &[f64]) -> StatBucket {
    values.sort_by(f64::total_cmp);
    // Sorted values fall in bins in order: count each run of one bin.
    let mut histogram: Vec<(u32, i64)> = Vec::new();
    for &v in &values {
        let bin = u32::try_from(bin_of(edges, v)).unwrap_or(u32::MAX);
        match histogram.last_mut() {
            Some((b, n)) if *b == bin => *n += 1,
            _ => histogram.push((bin, 1)),
        }
    }
    StatBucket {
        first_step,
        last_step,
        count: values.len() as i64,
        mean: values.iter().sum::<f64>() / values.len().max(1) as f64,
        min: values.first().copied().unwrap_or(f64::NAN),
        max: values.last().copied().unwrap_or(f64::NAN),
        p10: quantile(&values, 0.1),
        p50: quantile(&values, 0.5),
        p90: quantile(&values, 0.9),
        histogram,
    }
}

/// A series' buckets, by step: the cells' values grouped by bucket.
fn buckets<'c>(
    cells: impl Iterator<Item = &'c Cell>,
    width: i64,
    edges: &[f64],
) -> Vec<StatBucket> {
    let mut by_bucket: std::collections::BTreeMap<i64, Vec<f64>> = Default::default();
    for c in cells {
        by_bucket
            .entry(c.step.div_euclid(width))
            .or_default()
            .extend_from_slice(&c.values);
    }
    by_bucket
        .into_iter()
        .map(|(b, values)| {
            let first = b.saturating_mul(width);
            bucket(first, first.saturating_add(width - 1), values, edges)
        })
        .collect()
}

/// The distribution of `cells`: the whole list, then, split by `split`, its most
/// common values and the rest. Cells without values count for nothing.
pub(crate) fn summarize(
    cells: &[Cell],
    split: Option<&str>,
    buckets_max: usize,
    bins_max: usize,
) -> Stats {
    let cells: Vec<&Cell> = cells.iter().filter(|c| !c.values.is_empty()).collect();
    let (Some(min_step), Some(max_step)) = (
        cells.iter().map(|c| c.step).min(),
        cells.iter().map(|c| c.step).max(),
    ) else {
        return Stats::default();
    };
    let width = bucket_steps(min_step, max_step, buckets_max);
    let values = || cells.iter().flat_map(|c| c.values.iter().copied());
    let lo = values().fold(f64::INFINITY, f64::min);
    let hi = values().fold(f64::NEG_INFINITY, f64::max);
    let integers = values().all(|v| v.fract() == 0.0);
    let edges = bin_edges(lo, hi, bins_max, integers);
    let traces = cells.iter().map(|c| c.values.len() as i64).sum();
    let mut series = vec![StatSeries {
        traces,
        buckets: buckets(cells.iter().copied(), width, &edges),
        ..StatSeries::default()
    }];
    if let Some(key) = split {
        let mut counts: HashMap<&str, i64> = HashMap::new();
        for c in &cells {
            if let Some(label) = c.label.as_deref() {
                *counts.entry(label).or_default() += c.values.len() as i64;
            }
        }
        let mut ranked: Vec<(&str, i64)> = counts.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let (listed, rest) = ranked.split_at(ranked.len().min(MAX_SPLIT_VALUES));
        let filter = |test: Test| {
            TraceFilter {
                field: Field::Attr(key.to_string()),
                test,
            }
            .to_string()
        };
        let mut by_label: HashMap<&str, Vec<&Cell>> = HashMap::new();
        for c in &cells {
            if let Some(label) = c.label.as_deref() {
                by_label.entry(label).or_default().push(c);
            }
        }
        for (label, n) in listed {
            let of_label = by_label.remove(label).unwrap_or_default();
            series.push(StatSeries {
                label: Some(label.to_string()),
                other: false,
                filter: Some(filter(Test::Compare(
                    Op::Eq,
                    Value::Text(label.to_string()),
                ))),
                traces: *n,
                buckets: buckets(of_label.into_iter(), width, &edges),
            });
        }
        if !rest.is_empty() {
            let named: Vec<&str> = listed.iter().map(|(l, _)| *l).collect();
            // What the listed labels left in `by_label` is the rest.
            let others = by_label.into_values().flatten();
            series.push(StatSeries {
                label: None,
                other: true,
                filter: Some(filter(Test::In {
                    negated: true,
                    values: named.iter().map(|l| Value::Text(l.to_string())).collect(),
                })),
                traces: rest.iter().map(|(_, n)| n).sum(),
                buckets: buckets(others, width, &edges),
            });
        }
    }
    Stats {
        bucket_steps: width,
        edges,
        series,
        traces,
        ..Stats::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_are_round() {
        assert_eq!(nice_ceil(0.03), 0.05);
        assert_eq!(nice_ceil(3.0), 5.0);
        assert_eq!(nice_ceil(1.0), 1.0);
        assert_eq!(nice_ceil(120.0), 200.0);
        assert_eq!(bucket_steps(0, 499, 200), 5);
        assert_eq!(bucket_steps(0, 199, 200), 1);
        assert_eq!(bucket_steps(7, 7, 200), 1);
        // Aligned at multiples, 0..=1000 would need 201 buckets of 5.
        assert_eq!(bucket_steps(0, 1000, 200), 10);
    }

    #[test]
    fn edges_are_round_and_cover_the_values() {
        assert_eq!(bin_edges(0.0, 1.0, 4, false), vec![0.0, 0.5, 1.0, 1.5]);
        let e = bin_edges(0.13, 0.91, 40, false);
        assert!(e.iter().all(|x| (x * 100.0).round() / 100.0 == *x), "{e:?}");
        assert!(e[0] <= 0.13 && *e.last().expect("edge") > 0.91);
        assert!(e.len() - 1 <= 40);
        assert_eq!(
            bin_edges(3.0, 9.0, 40, true),
            vec![3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
        );
        assert_eq!(bin_edges(2.0, 2.0, 40, true), vec![2.0, 2.0]);
        assert_eq!(bin_edges(-1e308, 1e308, 40, false), vec![-1e308, 1e308]);
        assert_eq!(bin_of(&[-1e308, 1e308], 5.0), 0);
    }

    #[test]
    fn a_value_on_an_edge_falls_in_the_bin_it_starts() {
        let e = vec![0.0, 0.5, 1.0, 1.5];
        assert_eq!(bin_of(&e, 0.0), 0);
        assert_eq!(bin_of(&e, 0.49), 0);
        assert_eq!(bin_of(&e, 0.5), 1);
        assert_eq!(bin_of(&e, 1.0), 2);
        assert_eq!(bin_of(&[2.0, 2.0], 2.0), 0);
    }

    #[test]
    fn quantiles_interpolate() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0];
        assert_eq!(quantile(&v, 0.5), 6.0);
        assert_eq!(quantile(&v, 0.1), 2.0);
        assert_eq!(quantile(&[1.0, 2.0], 0.5), 1.5);
    }

    #[test]
    fn a_split_keeps_the_most_common_values_and_the_rest() {
        let cells: Vec<Cell> = (0..30)
            .map(|i| Cell {
                step: i,
                label: Some(format!("v{}", i % 15)),
                values: vec![i as f64],
            })
            .collect();
        let s = summarize(&cells, Some("family"), 200, 10);
        assert_eq!(s.series.len(), 1 + MAX_SPLIT_VALUES + 1);
        let other = s.series.last().expect("other");
        assert!(other.other);
        assert_eq!(other.traces, 6);
        let filter = other.filter.as_deref().expect("filter");
        assert!(
            filter.starts_with("attr.family not in (v0, v1, v10,"),
            "{filter}"
        );
        assert!(TraceFilter::parse(filter).is_ok());
        let counted: i64 = s.series[1..].iter().map(|x| x.traces).sum();
        assert_eq!(counted, 30);
    }
}
