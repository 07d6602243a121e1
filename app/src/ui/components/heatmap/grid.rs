//! A heatmap's geometry and its cells' links, apart from the view: where a bucket
//! and a bin sit in the drawing, which cell a point falls in, the colour of a count,
//! and the workspace link that lists exactly a cell's (or a dragged range's) traces.

use treeline_wire::stats::{StatBucket, StatSeries};

use crate::ui::components::chart::{
    round_interval, round_multiple, short, PAD_LEFT, PAD_RIGHT, WIDTH,
};
use crate::ui::format;
use crate::ui::url::WorkspaceUrl;

/// Space above and below the plot, in SVG units.
pub const PAD_Y: f64 = 6.0;

/// A heatmap's frame: the step axis it shares with the timeline, its bins' edges
/// and its height in SVG units.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    pub x0: i64,
    pub x1: i64,
    pub edges: Vec<f64>,
    pub height: f64,
}

/// A rectangle in SVG units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

impl Rect {
    /// As CSS percentages of the drawing, for HTML laid over it.
    pub fn style(&self, height: f64) -> String {
        let w = f64::from(WIDTH);
        format!(
            "left: {:.3}%; top: {:.3}%; width: {:.3}%; height: {:.3}%",
            self.x / w * 100.0,
            self.y / height * 100.0,
            self.w / w * 100.0,
            self.h / height * 100.0
        )
    }
}

impl Frame {
    pub fn bins(&self) -> usize {
        self.edges.len().saturating_sub(1).max(1)
    }

    fn plot_height(&self) -> f64 {
        (self.height - 2.0 * PAD_Y).max(1.0)
    }

    /// The x of a (fractional) step, in SVG units.
    fn x(&self, step: f64) -> f64 {
        let left = f64::from(PAD_LEFT);
        let right = f64::from(WIDTH - PAD_RIGHT);
        let t = (step - self.x0 as f64) / (self.x1 - self.x0).max(1) as f64;
        (left + t * (right - left)).clamp(left, right)
    }

    /// The y of a value, in SVG units (higher values higher up).
    pub fn y(&self, value: f64) -> f64 {
        let lo = self.edges.first().copied().unwrap_or(0.0);
        let hi = self.edges.last().copied().unwrap_or(1.0);
        let t = if hi > lo {
            (value - lo) / (hi - lo)
        } else {
            0.5
        };
        PAD_Y + self.plot_height() * (1.0 - t.clamp(0.0, 1.0))
    }

    /// A bucket's centre on the step axis, in SVG units.
    pub fn centre(&self, b: &StatBucket) -> f64 {
        self.x((b.first_step + b.last_step) as f64 / 2.0)
    }

    /// The cell of `bucket` and `bin`: half a step past either end of the bucket,
    /// so a one-step bucket is centred on its step as the timeline's marker is.
    pub fn cell(&self, bucket: &StatBucket, bin: usize) -> Rect {
        let x = self.x(bucket.first_step as f64 - 0.5);
        let right = self.x(bucket.last_step as f64 + 0.5);
        let h = self.plot_height() / self.bins() as f64;
        Rect {
            x,
            y: PAD_Y + h * (self.bins() - 1 - bin.min(self.bins() - 1)) as f64,
            w: (right - x).max(1.0),
            h,
        }
    }

    /// The bin at `fraction` (0 at the top, 1 at the bottom of the drawing).
    pub fn bin_at(&self, fraction: f64) -> usize {
        let y = fraction * self.height - PAD_Y;
        let from_top = (y / self.plot_height()).clamp(0.0, 0.999_999);
        self.bins() - 1 - (from_top * self.bins() as f64) as usize
    }

    /// The bucket of `series` nearest to `fraction` across the drawing.
    pub fn bucket_at(&self, series: &StatSeries, fraction: f64) -> Option<usize> {
        let x = fraction * f64::from(WIDTH);
        series
            .buckets
            .iter()
            .enumerate()
            .min_by(|a, b| {
                (self.centre(a.1) - x)
                    .abs()
                    .total_cmp(&(self.centre(b.1) - x).abs())
            })
            .map(|(i, _)| i)
    }

    /// Round values of the value axis (1, 2 or 5 times a power of ten apart, about
    /// four intervals), with their y in percent of the drawing.
    pub fn value_labels(&self) -> Vec<(f64, f64)> {
        let lo = self.edges.first().copied().unwrap_or(0.0);
        let hi = self.edges.last().copied().unwrap_or(1.0);
        if !(hi > lo && (hi - lo).is_finite()) {
            return vec![(lo, self.y(lo) / self.height * 100.0)];
        }
        let step = round_interval(hi - lo, 4.0);
        ((lo / step).ceil() as i64..)
            .map(|i| round_multiple(i, step))
            .take_while(|&v| v <= hi)
            .take(8)
            .map(|v| (v, self.y(v) / self.height * 100.0))
            .collect()
    }

    /// The SVG of the series' cells, coloured by how many traces each holds, with
    /// the median and the p10–p90 band of each bucket over them.
    pub fn svg(&self, series: &StatSeries) -> String {
        let most = most(series).max(1);
        let mut cells = String::new();
        for b in &series.buckets {
            for &(bin, n) in &b.histogram {
                let r = self.cell(b, bin as usize);
                cells.push_str(&format!(
                    r#"<rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="{}"/>"#,
                    r.x,
                    r.y,
                    r.w,
                    r.h,
                    colour(n, most)
                ));
            }
        }
        let line = |pick: fn(&StatBucket) -> f64| -> String {
            series
                .buckets
                .iter()
                .map(|b| format!("{:.2},{:.2}", self.centre(b), self.y(pick(b))))
                .collect::<Vec<_>>()
                .join(" ")
        };
        format!(
            r#"<svg viewBox="0 0 {WIDTH} {h}" preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg">{cells}<polyline class="band" points="{p10}"/><polyline class="band" points="{p90}"/><polyline class="median" points="{p50}"/></svg>"#,
            h = self.height,
            p10 = line(|b| b.p10),
            p90 = line(|b| b.p90),
            p50 = line(|b| b.p50),
        )
    }
}

/// The most traces any one cell of the series holds.
pub fn most(series: &StatSeries) -> i64 {
    series
        .buckets
        .iter()
        .flat_map(|b| b.histogram.iter().map(|h| h.1))
        .max()
        .unwrap_or(0)
}

/// How many traces the cell (`bucket`, `bin`) holds.
pub fn count(bucket: &StatBucket, bin: usize) -> i64 {
    bucket
        .histogram
        .binary_search_by_key(&(bin as u32), |h| h.0)
        .map_or(0, |i| bucket.histogram[i].1)
}

/// From the palest blue (a single trace) to the darkest (the busiest cell), on a
/// square-root scale so that a few traces still show.
pub fn colour(n: i64, most: i64) -> String {
    let t = (n as f64 / most.max(1) as f64).clamp(0.0, 1.0).sqrt();
    let mix = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(219.0, 30.0),
        mix(234.0, 58.0),
        mix(254.0, 138.0)
    )
}

/// The value test of bins `lo..=hi`: from the first's lower edge up to the last's
/// upper edge, which the last bin includes.
fn value_filters(value: &str, edges: &[f64], lo: usize, hi: usize) -> Vec<String> {
    let last = edges.len().saturating_sub(2);
    let upper = edges.get(hi + 1).copied().unwrap_or(f64::MAX);
    let below = if hi >= last { "<=" } else { "<" };
    vec![
        format!("{value} >= {}", edges.get(lo).copied().unwrap_or(f64::MIN)),
        format!("{value} {below} {upper}"),
    ]
}

/// The workspace link to the traces of `series` in steps `steps` and bins
/// `lo..=hi`: exactly those a cell (or a dragged range) counts.
pub fn link(
    run_id: &str,
    value: &str,
    series: &StatSeries,
    edges: &[f64],
    steps: (i64, i64),
    bins: (usize, usize),
) -> String {
    let mut filters: Vec<String> = series.filter.iter().cloned().collect();
    filters.extend(value_filters(value, edges, bins.0, bins.1));
    WorkspaceUrl {
        run_id: Some(run_id.to_string()),
        filters,
        min_step: Some(steps.0),
        max_step: Some(steps.1),
        ..Default::default()
    }
    .href()
}

/// What a cell holds, in words: for its link's name and the readout.
pub fn describe(value: &str, edges: &[f64], bucket: &StatBucket, bin: usize) -> String {
    let steps = if bucket.first_step == bucket.last_step {
        format!("step {}", bucket.first_step)
    } else {
        format!("steps {}–{}", bucket.first_step, bucket.last_step)
    };
    let lo = edges.get(bin).copied().unwrap_or(0.0);
    let hi = edges.get(bin + 1).copied().unwrap_or(lo);
    let n = count(bucket, bin);
    let traces = if n == 1 {
        "1 trace".to_string()
    } else {
        format!("{} traces", format::count(n))
    };
    format!(
        "{steps}, {value} {} to {}: {traces} (median {} there)",
        short(lo),
        short(hi),
        short(bucket.p50)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(first: i64, last: i64, histogram: Vec<(u32, i64)>) -> StatBucket {
        StatBucket {
            first_step: first,
            last_step: last,
            count: histogram.iter().map(|h| h.1).sum(),
            p10: 0.1,
            p50: 0.5,
            p90: 0.9,
            histogram,
            ..StatBucket::default()
        }
    }

    fn frame() -> Frame {
        Frame {
            x0: 0,
            x1: 99,
            edges: vec![0.0, 0.25, 0.5, 0.75, 1.0],
            height: 112.0,
        }
    }

    #[test]
    fn a_point_falls_in_the_cell_drawn_under_it() {
        let f = frame();
        let series = StatSeries {
            buckets: vec![bucket(0, 9, vec![(0, 3)]), bucket(50, 59, vec![(3, 1)])],
            ..StatSeries::default()
        };
        for (i, b) in series.buckets.iter().enumerate() {
            for bin in 0..4 {
                let r = f.cell(b, bin);
                let (fx, fy) = (
                    (r.x + r.w / 2.0) / f64::from(WIDTH),
                    (r.y + r.h / 2.0) / f.height,
                );
                assert_eq!(f.bucket_at(&series, fx), Some(i));
                assert_eq!(f.bin_at(fy), bin);
            }
        }
        // The top bin is drawn highest.
        assert!(f.cell(&series.buckets[0], 3).y < f.cell(&series.buckets[0], 0).y);
        assert_eq!(count(&series.buckets[0], 0), 3);
        assert_eq!(count(&series.buckets[0], 1), 0);
    }

    #[test]
    fn a_cell_links_to_exactly_its_traces() {
        let series = StatSeries {
            filter: Some("attr.family = code".into()),
            ..StatSeries::default()
        };
        let edges = [0.0, 0.25, 0.5, 0.75, 1.0];
        let href = link("r1", "attr.reward", &series, &edges, (10, 19), (1, 1));
        assert!(
            href.starts_with("/traces?run_id=r1&filter=attr.family%20%3D%20code"),
            "{href}"
        );
        assert!(
            href.contains("filter=attr.reward%20%3E%3D%200.25"),
            "{href}"
        );
        assert!(href.contains("filter=attr.reward%20%3C%200.5"), "{href}");
        assert!(href.ends_with("min_step=10&max_step=19"), "{href}");
        // The last bin includes its upper edge.
        let href = link("r1", "span_count", &series, &edges, (0, 0), (2, 3));
        assert!(href.contains("span_count%20%3C%3D%201"), "{href}");
    }

    #[test]
    fn colours_darken_with_the_count_and_labels_are_round() {
        assert_eq!(colour(0, 10), "#dbeafe");
        assert_eq!(colour(10, 10), "#1e3a8a");
        let labels: Vec<f64> = frame().value_labels().iter().map(|l| l.0).collect();
        assert_eq!(labels, [0.0, 0.5, 1.0]);
        let twentieths = Frame {
            edges: (0..=21).map(|i| f64::from(i) / 20.0).collect(),
            ..frame()
        };
        let labels: Vec<f64> = twentieths.value_labels().iter().map(|l| l.0).collect();
        assert_eq!(labels, [0.0, 0.5, 1.0]);
        let durations = Frame {
            edges: vec![0.0, 2000.0, 4000.0, 6000.0, 8000.0, 10000.0, 12000.0],
            ..frame()
        };
        let labels: Vec<f64> = durations.value_labels().iter().map(|l| l.0).collect();
        assert_eq!(labels, [0.0, 5000.0, 10000.0]);
    }
}
