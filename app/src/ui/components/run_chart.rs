//! One metric of several runs on one chart: a line per run in its own colour, an
//! optional moving average over a faint raw line, a drag to zoom, and a readout of
//! every run's value where the pointer is.

use leptos::prelude::*;
use plotters::prelude::*;

use super::chart::{
    axis_range, short, step_ticks, value_axis_over, value_ticks, ValueTicks, HEIGHT, PAD_LEFT,
    PAD_RIGHT, WIDTH,
};
use crate::ui::format;
use crate::ui::run_compare_url::XAxis;

const PAD_Y: u32 = 10;

/// Twenty colours told apart on white, one per run in the order of the comparison.
pub(crate) const PALETTE: [(u8, u8, u8); 20] = [
    (37, 99, 235),
    (220, 38, 38),
    (22, 163, 74),
    (147, 51, 234),
    (234, 88, 12),
    (8, 145, 178),
    (219, 39, 119),
    (101, 163, 13),
    (79, 70, 229),
    (161, 98, 7),
    (13, 148, 136),
    (190, 18, 60),
    (124, 58, 237),
    (21, 128, 61),
    (194, 65, 12),
    (29, 78, 216),
    (162, 28, 175),
    (3, 105, 161),
    (180, 83, 9),
    (71, 85, 105),
];

/// The CSS colour of the `i`th run.
pub(crate) fn colour(i: usize) -> String {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// A run's line: its name, its place in the palette, its points (x in the axis's
/// units, in order).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ChartLine {
    pub name: String,
    pub colour: usize,
    pub points: Vec<(f64, f64)>,
}

/// An exponential moving average that weighs the past by `weight`, corrected for
/// its start (so the first values are not pulled towards zero).
pub(crate) fn ema(points: &[(f64, f64)], weight: f64) -> Vec<(f64, f64)> {
    if weight <= 0.0 {
        return points.to_vec();
    }
    let mut last = 0.0;
    let mut kept = 1.0;
    points
        .iter()
        .map(|&(x, v)| {
            last = last * weight + (1.0 - weight) * v;
            kept *= weight;
            (x, last / (1.0 - kept))
        })
        .collect()
}

/// The smallest and largest value of `lines` within `x0..=x1`.
fn value_range(lines: &[ChartLine], x0: f64, x1: f64) -> Option<(f64, f64)> {
    let mut values = lines
        .iter()
        .flat_map(|l| l.points.iter())
        .filter(|p| p.0 >= x0 && p.0 <= x1)
        .map(|p| p.1)
        .peekable();
    values.peek()?;
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    Some((lo, hi))
}

/// Round times, in seconds, that an axis may step by.
const TIME_STEPS: [i64; 21] = [
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1_800, 3_600, 7_200, 10_800, 21_600, 43_200,
    86_400, 172_800, 604_800, 2_592_000,
];

/// Where the x-axis is labelled, with each label: round steps, round times of day
/// (UTC), or round durations since the run's start.
pub(crate) fn x_ticks(axis: XAxis, x0: f64, x1: f64) -> Vec<(f64, String)> {
    match axis {
        XAxis::Step => step_ticks(x0.ceil() as i64, x1.floor() as i64)
            .into_iter()
            .map(|s| (s as f64, s.to_string()))
            .collect(),
        XAxis::Wall | XAxis::Elapsed => {
            let span_s = ((x1 - x0) / 1e6).max(1.0);
            let every = TIME_STEPS
                .iter()
                .copied()
                .find(|&s| span_s / s as f64 <= 6.0)
                .unwrap_or(TIME_STEPS[TIME_STEPS.len() - 1]);
            let every_us = every * 1_000_000;
            let first = (x0 as i64).div_euclid(every_us) + 1;
            (first..)
                .map(|i| i.saturating_mul(every_us))
                .take_while(|&t| t as f64 <= x1)
                .take(12)
                .map(|t| {
                    let label = if axis == XAxis::Wall {
                        wall_label(t, every)
                    } else {
                        elapsed_label(t)
                    };
                    (t as f64, label)
                })
                .collect()
        }
    }
}

/// `14:05`, `14:05:30` when the axis steps by seconds, `11-29` by days.
fn wall_label(t_us: i64, every_s: i64) -> String {
    let minute = format::utc_minute(t_us);
    let (date, time) = minute.split_once('T').unwrap_or(("", &minute));
    if every_s >= 86_400 {
        date.get(5..).unwrap_or(date).to_string()
    } else if every_s < 60 {
        format!("{time}:{:02}", t_us.div_euclid(1_000_000).rem_euclid(60))
    } else {
        time.to_string()
    }
}

/// `0`, `45 s`, `5 min`, `1 h 30 min`, `2 d`.
pub(crate) fn elapsed_label(t_us: i64) -> String {
    let s = t_us.div_euclid(1_000_000);
    match s {
        0 => "0".into(),
        1..=59 => format!("{s} s"),
        60..=3_599 if s % 60 == 0 => format!("{} min", s / 60),
        60..=3_599 => format!("{} min {} s", s / 60, s % 60),
        3_600..=86_399 if s % 3_600 == 0 => format!("{} h", s / 3_600),
        3_600..=86_399 => format!("{} h {} min", s / 3_600, (s % 3_600) / 60),
        _ if s % 86_400 == 0 => format!("{} d", s / 86_400),
        _ => format!("{} d {} h", s / 86_400, (s % 86_400) / 3_600),
    }
}

/// A point's x as the readout names it.
fn x_label(axis: XAxis, x: f64) -> String {
    match axis {
        XAxis::Step => format!("step {}", x.round() as i64),
        XAxis::Wall => format::timestamp(x as i64),
        XAxis::Elapsed => format!("{} since start", elapsed_label(x as i64)),
    }
}

/// The SVG of `lines` over `x0..=x1` with a grid line at each value of `axis`;
/// with smoothing, each raw line faint under its average.
pub(crate) fn lines_svg(
    lines: &[ChartLine],
    axis: &[f64],
    x0: f64,
    x1: f64,
    smooth: f64,
) -> String {
    let mut svg = String::new();
    let (lo, hi) = axis_range(axis);
    let x1 = if x1 <= x0 { x0 + 1.0 } else { x1 };
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let area = root.margin(PAD_Y, PAD_Y, PAD_LEFT, PAD_RIGHT);
        let drawn = ChartBuilder::on(&area)
            .build_cartesian_2d(x0..x1, lo..hi)
            .and_then(|mut chart| {
                let grid = RGBColor(226, 230, 236);
                for &y in axis {
                    chart.draw_series(std::iter::once(PathElement::new(
                        vec![(x0, y), (x1, y)],
                        grid.stroke_width(1),
                    )))?;
                }
                for line in lines {
                    let (r, g, b) = PALETTE[line.colour % PALETTE.len()];
                    let hue = RGBColor(r, g, b);
                    let inside = line
                        .points
                        .iter()
                        .copied()
                        .filter(|p| p.0 >= x0 && p.0 <= x1);
                    if smooth > 0.0 {
                        chart
                            .draw_series(LineSeries::new(inside, hue.mix(0.25).stroke_width(1)))?;
                        let smoothed = ema(&line.points, smooth);
                        let inside = smoothed.into_iter().filter(|p| p.0 >= x0 && p.0 <= x1);
                        chart.draw_series(LineSeries::new(inside, hue.stroke_width(2)))?;
                    } else {
                        chart.draw_series(LineSeries::new(inside, hue.stroke_width(2)))?;
                    }
                }
                Ok(())
            });
        if drawn.is_err() {
            return String::new();
        }
        let _ = root.present();
    }
    svg
}

/// Where `fraction` (0..1 across the drawing) falls on the x-axis `x0..x1`.
fn x_at(fraction: f64, x0: f64, x1: f64) -> f64 {
    let left = f64::from(PAD_LEFT) / f64::from(WIDTH);
    let right = 1.0 - f64::from(PAD_RIGHT) / f64::from(WIDTH);
    let t = ((fraction - left) / (right - left)).clamp(0.0, 1.0);
    x0 + t * (x1 - x0)
}

/// Percent across the drawing where `x` sits.
fn percent_at(x: f64, x0: f64, x1: f64) -> f64 {
    let left = f64::from(PAD_LEFT) / f64::from(WIDTH) * 100.0;
    let right = 100.0 - f64::from(PAD_RIGHT) / f64::from(WIDTH) * 100.0;
    let t = (x - x0) / (x1 - x0).max(f64::MIN_POSITIVE);
    left + t * (right - left)
}

/// The value of `points` nearest to `x` (points in x order).
fn nearest(points: &[(f64, f64)], x: f64) -> Option<(f64, f64)> {
    let i = points.partition_point(|p| p.0 < x);
    [i.checked_sub(1), Some(i)]
        .into_iter()
        .flatten()
        .filter_map(|i| points.get(i).copied())
        .min_by(|a, b| (a.0 - x).abs().total_cmp(&(b.0 - x).abs()))
}

/// A line as the readout reads it: its run's name, colour and drawn points.
type Shown = (String, usize, Vec<(f64, f64)>);

/// A drag across the chart, as fractions of its width: where it began, where it is.
type Drag = Option<(f64, f64)>;

/// One metric with a line per run. `domain` is the x range drawn (the data's own
/// when not zoomed); a drag calls `on_zoom` with the range it covers, a double click
/// `on_reset`.
#[component]
pub(crate) fn RunChart(
    #[prop(into)] label: String,
    lines: Vec<ChartLine>,
    /// The runs of the comparison that did not log this metric.
    missing: Vec<String>,
    axis: XAxis,
    domain: (f64, f64),
    smooth: f64,
    on_zoom: Callback<(f64, f64)>,
    on_reset: Callback<()>,
) -> impl IntoView {
    let (x0, x1) = domain;
    let y_axis = value_axis_over(value_range(&lines, x0, x1));
    let svg = lines_svg(&lines, &y_axis, x0, x1, smooth);
    let ticks = value_ticks(&y_axis);
    let x_ticks = x_ticks(axis, x0, x1);
    // The readout names what is drawn boldest: the average when smoothing.
    let shown: Vec<Shown> = lines
        .iter()
        .map(|l| (l.name.clone(), l.colour, ema(&l.points, smooth)))
        .collect();
    let shown = StoredValue::new(shown);
    let hover = RwSignal::new(None::<f64>);
    let drag = RwSignal::new(None as Drag);
    let surface = NodeRef::<leptos::html::Div>::new();
    let fraction = move |ev: &leptos::ev::MouseEvent| -> Option<f64> {
        let rect = surface.get()?.get_bounding_client_rect();
        (rect.width() > 0.0)
            .then(|| ((f64::from(ev.client_x()) - rect.left()) / rect.width()).clamp(0.0, 1.0))
    };
    let on_down = move |ev: leptos::ev::MouseEvent| {
        if ev.button() == 0 {
            ev.prevent_default();
            drag.set(fraction(&ev).map(|f| (f, f)));
        }
    };
    let on_move = move |ev: leptos::ev::MouseEvent| {
        let Some(f) = fraction(&ev) else { return };
        if let Some((start, _)) = drag.get_untracked() {
            drag.set(Some((start, f)));
        }
        hover.set(Some(x_at(f, x0, x1)));
    };
    let on_up = move |_| {
        if let Some((a, b)) = drag.get_untracked() {
            drag.set(None);
            // A click is not a zoom: the drag must cover a hundredth of the width.
            if (a - b).abs() >= 0.01 {
                let (a, b) = (x_at(a.min(b), x0, x1), x_at(a.max(b), x0, x1));
                on_zoom.run((a, b));
            }
        }
    };
    let readout = move || {
        let x = hover.get()?;
        let rows: Vec<(String, usize, f64)> = shown.with_value(|shown| {
            shown
                .iter()
                .filter_map(|(name, c, pts)| nearest(pts, x).map(|p| (name.clone(), *c, p.1)))
                .collect()
        });
        (!rows.is_empty()).then_some((x, rows))
    };
    let aria = format!(
        "{label}: {} over {}; drag across to zoom, double-click to reset",
        match lines.len() {
            1 => "1 line".to_owned(),
            n => format!("{n} lines"),
        },
        axis.label().to_lowercase()
    );
    let missing_note =
        (!missing.is_empty()).then(|| format!("not logged by {}", missing.join(", ")));
    view! {
        <figure class="chart run-chart">
            <figcaption>
                <span class="chart-title">{label}</span>
                {missing_note.map(|n| view! { <span class="chart-range missing">{n}</span> })}
            </figcaption>
            <div class="chart-frame">
                <div
                    class="chart-surface zoomable"
                    node_ref=surface
                    role="img"
                    aria-label=aria
                    on:mousedown=on_down
                    on:mousemove=on_move
                    on:mouseup=on_up
                    on:mouseleave=move |_| { hover.set(None); drag.set(None); }
                    on:dblclick=move |_| on_reset.run(())
                    inner_html=svg
                ></div>
                <ValueTicks ticks/>
                <div
                    class="zoom-band"
                    aria-hidden="true"
                    style=move || match drag.get() {
                        Some((a, b)) if (a - b).abs() > 0.0 => format!(
                            "left: calc(var(--gutter, 0px) + (100% - var(--gutter, 0px)) * {:.4}); \
                             width: calc((100% - var(--gutter, 0px)) * {:.4})",
                            a.min(b),
                            (a - b).abs()
                        ),
                        _ => "display: none".into(),
                    }
                ></div>
            </div>
            <div
                class="chart-readout run-readout"
                style=move || match hover.get() {
                    Some(x) if drag.get().is_none() => format!(
                        "left: calc(var(--gutter, 0px) + (100% - var(--gutter, 0px)) * {:.4})",
                        percent_at(x, x0, x1) / 100.0
                    ),
                    _ => "display: none".to_string(),
                }
            >
                {move || readout().map(|(x, rows)| view! {
                    <div class="readout-x">{x_label(axis, x)}</div>
                    {rows.into_iter().map(|(name, c, v)| view! {
                        <div><span class="swatch" style=format!("background: {}", colour(c))></span>
                            {format!("{name}: {}", short(v))}</div>
                    }).collect_view()}
                })}
            </div>
            <div class="chart-axis" aria-hidden="true">
                {x_ticks.into_iter().map(|(x, text)| {
                    let pct = percent_at(x, x0, x1);
                    let shift = if pct < 6.0 { 0.0 } else if pct > 94.0 { -100.0 } else { -50.0 };
                    view! {
                        <span style=format!(
                            "left: calc(var(--gutter, 0px) + (100% - var(--gutter, 0px)) * {:.4}); transform: translateX({shift}%)",
                            pct / 100.0
                        )>{text}</span>
                    }
                }).collect_view()}
            </div>
        </figure>
    }
}

/// The x range of `lines` together, or `None` without a point.
pub(crate) fn data_domain(lines: &[ChartLine]) -> Option<(f64, f64)> {
    let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    (lo.is_finite() && hi.is_finite()).then_some(if hi > lo { (lo, hi) } else { (lo, lo + 1.0) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_average_starts_at_the_first_value_and_follows_the_line() {
        let points: Vec<(f64, f64)> = (0..5).map(|i| (i as f64, 10.0)).collect();
        // A flat line stays flat from its first point: the start is corrected for.
        assert!(ema(&points, 0.9).iter().all(|p| (p.1 - 10.0).abs() < 1e-9));
        let step = [(0.0, 0.0), (1.0, 1.0), (2.0, 1.0)];
        let smoothed = ema(&step, 0.5);
        assert_eq!(smoothed[0], (0.0, 0.0));
        assert!(smoothed[2].1 > smoothed[1].1 && smoothed[2].1 < 1.0);
        assert_eq!(ema(&step, 0.0), step.to_vec());
    }

    #[test]
    fn time_axes_tick_at_round_times() {
        let hour = 3_600_000_000.0;
        let ticks = x_ticks(XAxis::Elapsed, 0.0, 2.0 * hour);
        let labels: Vec<&str> = ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["30 min", "1 h", "1 h 30 min", "2 h"]);
        // 2026-12-03 14:00 UTC and an hour after it: at most six ticks, every 10 minutes.
        let at = 1_796_306_400_000_000.0;
        let wall = x_ticks(XAxis::Wall, at, at + hour);
        let labels: Vec<&str> = wall.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(
            labels,
            ["14:10", "14:20", "14:30", "14:40", "14:50", "15:00"]
        );
        let steps = x_ticks(XAxis::Step, 0.0, 400.0);
        assert_eq!(steps.first().map(|t| t.1.as_str()), Some("0"));
    }

    #[test]
    fn the_domain_covers_every_line() {
        let line = |pts: Vec<(f64, f64)>| ChartLine {
            name: "r".into(),
            colour: 0,
            points: pts,
        };
        let lines = [line(vec![(5.0, 1.0), (9.0, 2.0)]), line(vec![(2.0, 0.0)])];
        assert_eq!(data_domain(&lines), Some((2.0, 9.0)));
        assert_eq!(data_domain(&[]), None);
        assert_eq!(value_range(&lines, 4.0, 10.0), Some((1.0, 2.0)));
    }
}
