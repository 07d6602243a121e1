//! Line charts drawn with plotters into an SVG string: the same picture on the server
//! and in the browser, with a hover readout of the nearest point.

use leptos::prelude::*;

/// The drawing's size in SVG units; CSS scales it to the container's width.
pub const WIDTH: u32 = 640;
pub const HEIGHT: u32 = 160;
/// The plot area's left and right insets, shared with the timeline lane below a chart.
pub const PAD_LEFT: u32 = 8;
pub const PAD_RIGHT: u32 = 8;
const PAD_Y: u32 = 10;

/// The data's smallest and largest value; None without a finite point.
fn data_range(points: &[(i64, f64)]) -> Option<(f64, f64)> {
    let lo = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let hi = points.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    (lo.is_finite() && hi.is_finite()).then_some((lo, hi))
}

/// A round interval (1, 2 or 5 times a power of ten) that cuts `span` into about
/// `count` pieces: what charts share, so a reader can compare them.
pub(crate) fn round_interval(span: f64, count: f64) -> f64 {
    let raw = span / count;
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    let fraction = raw / power;
    let round = match fraction {
        f if f <= 1.0 => 1.0,
        f if f <= 2.0 => 2.0,
        f if f <= 5.0 => 5.0,
        _ => 10.0,
    };
    round * power
}

/// The value axis: round values from just below the data to just above it, about
/// four intervals apart (bottom first). A flat series gets room around its value.
fn value_axis(points: &[(i64, f64)]) -> Vec<f64> {
    value_axis_over(data_range(points))
}

/// [`value_axis`] over the data's range (`None`: no data).
pub(crate) fn value_axis_over(range: Option<(f64, f64)>) -> Vec<f64> {
    let (lo, hi) = match range {
        None => (0.0, 1.0),
        Some((lo, hi)) if hi - lo < 1e-12 => {
            let room = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
            (lo - room, hi + room)
        }
        Some(range) => range,
    };
    let step = round_interval(hi - lo, 4.0);
    let first = (lo / step).floor() as i64;
    let last = (hi / step).ceil() as i64;
    (first..=last.max(first + 1))
        .map(|i| round_multiple(i, step))
        .collect()
}

/// `i` times a round `step`, rounded to the step's decimals: 0.6, not
/// 0.6000000000000001.
pub(crate) fn round_multiple(i: i64, step: f64) -> f64 {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let v = i as f64 * step;
    format!("{v:.decimals$}").parse::<f64>().unwrap_or(v)
}

/// The value range drawn: the axis's first and last tick.
pub(crate) fn axis_range(axis: &[f64]) -> (f64, f64) {
    (
        axis.first().copied().unwrap_or(0.0),
        axis.last().copied().unwrap_or(1.0),
    )
}

/// The caption's range: the data's own smallest and largest value, not the axis's.
fn range_caption(points: &[(i64, f64)]) -> String {
    match data_range(points) {
        Some((lo, hi)) => format!("min {} · max {}", short(lo), short(hi)),
        None => "no values".into(),
    }
}

/// The SVG of `points` over the steps `x0..=x1`, with a grid line at each value of
/// `axis` (from [`value_axis`]).
pub fn line_svg(points: &[(i64, f64)], axis: &[f64], x0: i64, x1: i64) -> String {
    // One line in the first colour of the compare charts' palette, drawn by them.
    let line = super::run_chart::ChartLine {
        name: String::new(),
        colour: 0,
        points: points.iter().map(|&(s, v)| (s as f64, v)).collect(),
    };
    super::run_chart::lines_svg(&[line], axis, x0 as f64, x1 as f64, 0.0)
}

/// The value axis's labels, laid over a chart at their grid lines.
#[component]
pub fn ValueTicks(ticks: Vec<(f64, f64)>) -> impl IntoView {
    view! {
        <div class="chart-ticks" aria-hidden="true">
            {ticks.into_iter().map(|(v, top)| view! {
                <span style=format!("top: {top:.2}%")>{short(v)}</span>
            }).collect_view()}
        </div>
    }
}

/// Each value of the axis (bottom first) with how far down the drawing its grid
/// line sits, in percent: the y-axis labels laid over the SVG.
pub fn value_ticks(axis: &[f64]) -> Vec<(f64, f64)> {
    let (lo, hi) = axis_range(axis);
    let plot = f64::from(HEIGHT - 2 * PAD_Y);
    axis.iter()
        .map(|&v| {
            let t = (v - lo) / (hi - lo);
            let top = (f64::from(PAD_Y) + plot * (1.0 - t)) / f64::from(HEIGHT) * 100.0;
            (v, top)
        })
        .collect()
}

/// Round steps within `x0..=x1`, about five intervals apart (0, 100, 200 …), for the
/// x-axis labels.
pub fn step_ticks(x0: i64, x1: i64) -> Vec<i64> {
    let interval = (round_interval((x1 - x0).max(1) as f64, 5.0) as i64).max(1);
    let first = x0.div_euclid(interval) + i64::from(x0.rem_euclid(interval) != 0);
    (first..)
        .map(|i| i.saturating_mul(interval))
        .take_while(|&step| step <= x1)
        .take(12)
        .collect()
}

/// The point nearest to `step` (points are in step order).
pub fn nearest(points: &[(i64, f64)], step: f64) -> Option<(i64, f64)> {
    let i = points.partition_point(|p| (p.0 as f64) < step);
    let candidates = [i.checked_sub(1), Some(i)];
    candidates
        .into_iter()
        .flatten()
        .filter_map(|i| points.get(i).copied())
        .min_by(|a, b| {
            (a.0 as f64 - step)
                .abs()
                .total_cmp(&(b.0 as f64 - step).abs())
        })
}

/// Where `fraction` (0..1 across the drawing) falls on the step axis.
pub fn step_at(fraction: f64, x0: i64, x1: i64) -> f64 {
    let left = f64::from(PAD_LEFT) / f64::from(WIDTH);
    let right = 1.0 - f64::from(PAD_RIGHT) / f64::from(WIDTH);
    let t = ((fraction - left) / (right - left)).clamp(0.0, 1.0);
    x0 as f64 + t * (x1 - x0).max(1) as f64
}

/// Percent across the drawing where `step` sits, for HTML laid over the chart.
pub fn percent_of(step: i64, x0: i64, x1: i64) -> f64 {
    let left = f64::from(PAD_LEFT) / f64::from(WIDTH) * 100.0;
    let right = 100.0 - f64::from(PAD_RIGHT) / f64::from(WIDTH) * 100.0;
    let t = (step - x0) as f64 / (x1 - x0).max(1) as f64;
    left + t * (right - left)
}

/// A chart of one series with its range and a hover readout.
#[component]
pub fn LineChart(
    #[prop(into)] label: String,
    points: Vec<(i64, f64)>,
    /// The step range to draw over; the series' own by default.
    #[prop(optional)]
    domain: Option<(i64, i64)>,
) -> impl IntoView {
    let (x0, x1) = domain.unwrap_or_else(|| {
        (
            points.first().map_or(0, |p| p.0),
            points.last().map_or(1, |p| p.0),
        )
    });
    let axis = value_axis(&points);
    let svg = line_svg(&points, &axis, x0, x1);
    let ticks = value_ticks(&axis);
    let caption = range_caption(&points);
    let points = StoredValue::new(points);
    let hover = RwSignal::new(None::<(i64, f64, f64)>);
    let surface = NodeRef::<leptos::html::Div>::new();
    let on_move = move |ev: leptos::ev::MouseEvent| {
        let Some(el) = surface.get() else { return };
        let rect = el.get_bounding_client_rect();
        if rect.width() <= 0.0 {
            return;
        }
        let fraction = (f64::from(ev.client_x()) - rect.left()) / rect.width();
        let step = step_at(fraction, x0, x1);
        hover.set(
            points
                .with_value(|p| nearest(p, step))
                .map(|(s, v)| (s, v, percent_of(s, x0, x1))),
        );
    };
    let aria = format!("{label}: line chart over steps {x0} to {x1}");
    view! {
        <figure class="chart">
            <figcaption>
                <span class="chart-title">{label}</span>
                <span class="chart-range" title="the smallest and largest value logged">{caption}</span>
            </figcaption>
            <div class="chart-frame">
                <div
                    class="chart-surface"
                    node_ref=surface
                    role="img"
                    aria-label=aria
                    on:mousemove=on_move
                    on:mouseleave=move |_| hover.set(None)
                    inner_html=svg
                ></div>
                <ValueTicks ticks/>
            </div>
            // Always present (hidden when idle) so hydration sees the same nodes.
            <div
                class="chart-readout"
                style=move || match hover.get() {
                    // Across the plot, past the values' gutter where there is one.
                    Some((_, _, pct)) => format!(
                        "left: calc(var(--gutter, 0px) + (100% - var(--gutter, 0px)) * {:.4})",
                        pct / 100.0
                    ),
                    None => "display: none".to_string(),
                }
            >
                {move || hover.get().map(|(s, v, _)| format!("step {s}: {}", short(v))).unwrap_or_default()}
            </div>
            <div class="chart-axis" aria-hidden="true">
                {step_ticks(x0, x1).into_iter().map(|step| {
                    let pct = percent_of(step, x0, x1);
                    // Centred under its step, but kept inside the chart at either end.
                    let shift = if pct < 6.0 { 0.0 } else if pct > 94.0 { -100.0 } else { -50.0 };
                    view! {
                        <span style=format!(
                            "left: calc(var(--gutter, 0px) + (100% - var(--gutter, 0px)) * {:.4}); transform: translateX({shift}%)",
                            pct / 100.0
                        )>{format!("step {step}")}</span>
                    }
                }).collect_view()}
            </div>
        </figure>
    }
}

/// A number in at most about six significant digits.
pub fn short(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let magnitude = v.abs().log10();
    if (-3.0..6.0).contains(&magnitude) {
        let decimals = (4.0 - magnitude.floor()).clamp(0.0, 6.0) as usize;
        let text = format!("{v:.decimals$}");
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            text
        }
    } else {
        // 3.4e-4, not 3.400e-4: the zeros say nothing.
        let text = format!("{v:.3e}");
        match text.split_once('e') {
            Some((mantissa, exponent)) if mantissa.contains('.') => format!(
                "{}e{exponent}",
                mantissa.trim_end_matches('0').trim_end_matches('.')
            ),
            _ => text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_point_is_found_on_either_side() {
        let points = vec![(0, 1.0), (10, 2.0), (20, 3.0)];
        assert_eq!(nearest(&points, 4.0), Some((0, 1.0)));
        assert_eq!(nearest(&points, 6.0), Some((10, 2.0)));
        assert_eq!(nearest(&points, 99.0), Some((20, 3.0)));
        assert_eq!(nearest(&[], 1.0), None);
    }

    #[test]
    fn value_ticks_are_round_and_cover_the_data() {
        let values = |points: &[(i64, f64)]| -> Vec<f64> {
            value_ticks(&value_axis(points))
                .iter()
                .map(|t| t.0)
                .collect()
        };
        // The reward chart that read 137.57, 283.84, 430.12.
        let reward = [(0, 137.6), (5, 430.1), (9, 300.0)];
        assert_eq!(values(&reward), [100.0, 200.0, 300.0, 400.0, 500.0]);
        assert_eq!(values(&[(0, 0.297), (1, 0.875)]), [0.2, 0.4, 0.6, 0.8, 1.0]);
        assert_eq!(values(&[(0, -3.0), (1, 2.0)]), [-4.0, -2.0, 0.0, 2.0]);
        // A flat series has room around it; no data draws 0 to 1.
        assert_eq!(values(&[(0, 5.0), (1, 5.0)]), [4.5, 5.0, 5.5]);
        assert_eq!(values(&[(0, 0.0)]), [-1.0, -0.5, 0.0, 0.5, 1.0]);
        assert_eq!(values(&[]), [0.0, 0.5, 1.0]);
        // The bottom tick sits PAD_Y above the drawing's bottom edge, the top one PAD_Y
        // below its top.
        let ticks = value_ticks(&value_axis(&reward));
        assert!((ticks[0].1 - 93.75).abs() < 1e-9 && (ticks[4].1 - 6.25).abs() < 1e-9);
    }

    #[test]
    fn step_ticks_are_round_steps_within_the_range() {
        assert_eq!(step_ticks(0, 496), [0, 100, 200, 300, 400]);
        assert_eq!(step_ticks(0, 400), [0, 100, 200, 300, 400]);
        assert_eq!(step_ticks(3, 497), [100, 200, 300, 400]);
        assert_eq!(step_ticks(5, 7), [5, 6, 7]);
        assert_eq!(step_ticks(3, 3), [3]);
        assert_eq!(step_ticks(0, 9), [0, 2, 4, 6, 8]);
        assert_eq!(step_ticks(-20, 20), [-20, -10, 0, 10, 20]);
    }

    #[test]
    fn the_caption_gives_the_datas_range_not_the_padded_axis() {
        let points = [(0, 0.297), (1, 0.875), (2, 0.5)];
        assert_eq!(range_caption(&points), "min 0.297 · max 0.875");
        let (lo, hi) = axis_range(&value_axis(&points));
        assert!(
            lo < 0.297 && hi > 0.875,
            "the axis reaches round values past the data"
        );
        assert_eq!(range_caption(&[]), "no values");
    }

    #[test]
    fn the_svg_draws_the_series() {
        let points = [(0, 1.0), (5, 3.0), (9, 2.0)];
        let svg = line_svg(&points, &value_axis(&points), 0, 9);
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("polyline") || svg.contains("path"));
        assert_eq!(short(0.000123456), "1.235e-4");
        assert_eq!(short(-0.00034), "-3.4e-4");
        assert_eq!(short(2e9), "2e9");
        assert_eq!(short(1234.5), "1234.5");
    }
}
