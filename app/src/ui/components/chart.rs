//! Line charts drawn with plotters into an SVG string: the same picture on the server
//! and in the browser, with a hover readout of the nearest point.

use leptos::prelude::*;
use plotters::prelude::*;

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

/// The value range drawn: the data's, widened a little so a flat line is still
/// visible.
fn value_range(points: &[(i64, f64)]) -> (f64, f64) {
    let Some((lo, hi)) = data_range(points) else {
        return (0.0, 1.0);
    };
    let pad = ((hi - lo) * 0.08).max(1e-9);
    (lo - pad, hi + pad)
}

/// The caption's range: the data's own smallest and largest value, not the axis's.
fn range_caption(points: &[(i64, f64)]) -> String {
    match data_range(points) {
        Some((lo, hi)) => format!("min {} · max {}", short(lo), short(hi)),
        None => "no values".into(),
    }
}

/// The SVG of `points` over the steps `x0..=x1`.
pub fn line_svg(points: &[(i64, f64)], x0: i64, x1: i64) -> String {
    let mut svg = String::new();
    let (lo, hi) = value_range(points);
    let x1 = if x1 <= x0 { x0 + 1 } else { x1 };
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let area = root.margin(PAD_Y, PAD_Y, PAD_LEFT, PAD_RIGHT);
        let drawn = ChartBuilder::on(&area)
            .build_cartesian_2d(x0 as f64..x1 as f64, lo..hi)
            .and_then(|mut chart| {
                let grid = RGBColor(226, 230, 236);
                for i in 0..=3 {
                    let y = lo + (hi - lo) * f64::from(i) / 3.0;
                    chart.draw_series(std::iter::once(PathElement::new(
                        vec![(x0 as f64, y), (x1 as f64, y)],
                        grid.stroke_width(1),
                    )))?;
                }
                chart.draw_series(LineSeries::new(
                    points.iter().map(|&(s, v)| (s as f64, v)),
                    RGBColor(37, 99, 235).stroke_width(2),
                ))?;
                Ok(())
            });
        if drawn.is_err() {
            return String::new();
        }
        let _ = root.present();
    }
    svg
}

/// The value at each of the chart's four grid lines (bottom first) with how far
/// down the drawing it sits, in percent: the y-axis labels laid over the SVG.
pub fn value_ticks(lo: f64, hi: f64) -> Vec<(f64, f64)> {
    let plot = f64::from(HEIGHT - 2 * PAD_Y);
    (0..=3)
        .map(|i| {
            let t = f64::from(i) / 3.0;
            let top = (f64::from(PAD_Y) + plot * (1.0 - t)) / f64::from(HEIGHT) * 100.0;
            (lo + (hi - lo) * t, top)
        })
        .collect()
}

/// Five steps evenly across `x0..=x1` (fewer when the range is narrower), for the
/// x-axis labels.
pub fn step_ticks(x0: i64, x1: i64) -> Vec<i64> {
    let span = (x1 - x0).max(0);
    let mut ticks: Vec<i64> = (0..=4).map(|i| x0 + span * i / 4).collect();
    ticks.dedup();
    ticks
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
    let svg = line_svg(&points, x0, x1);
    let (lo, hi) = value_range(&points);
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
                <div class="chart-ticks" aria-hidden="true">
                    {value_ticks(lo, hi).into_iter().map(|(v, top)| view! {
                        <span style=format!("top: {top:.2}%")>{short(v)}</span>
                    }).collect_view()}
                </div>
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
                {step_ticks(x0, x1).into_iter().map(|step| view! { <span>{format!("step {step}")}</span> }).collect_view()}
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
    fn ticks_label_the_grid_lines_and_spread_over_the_steps() {
        let ticks = value_ticks(0.0, 3.0);
        assert_eq!(
            ticks.iter().map(|t| t.0).collect::<Vec<_>>(),
            [0.0, 1.0, 2.0, 3.0]
        );
        // The bottom grid line sits PAD_Y above the drawing's bottom edge.
        assert!((ticks[0].1 - 93.75).abs() < 1e-9 && (ticks[3].1 - 6.25).abs() < 1e-9);
        assert_eq!(step_ticks(0, 400), [0, 100, 200, 300, 400]);
        assert_eq!(step_ticks(5, 7), [5, 6, 7]);
        assert_eq!(step_ticks(3, 3), [3]);
    }

    #[test]
    fn the_caption_gives_the_datas_range_not_the_padded_axis() {
        let points = [(0, 0.297), (1, 0.875), (2, 0.5)];
        assert_eq!(range_caption(&points), "min 0.297 · max 0.875");
        let (lo, hi) = value_range(&points);
        assert!(lo < 0.297 && hi > 0.875, "the axis is padded");
        assert_eq!(range_caption(&[]), "no values");
    }

    #[test]
    fn the_svg_draws_the_series() {
        let svg = line_svg(&[(0, 1.0), (5, 3.0), (9, 2.0)], 0, 9);
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("polyline") || svg.contains("path"));
        assert_eq!(short(0.000123456), "1.235e-4");
        assert_eq!(short(-0.00034), "-3.4e-4");
        assert_eq!(short(2e9), "2e9");
        assert_eq!(short(1234.5), "1234.5");
    }
}
