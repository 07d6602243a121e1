//! The step-axis trace activity timeline: a metric line over the steps, a lane of one
//! marker per step below it (a small pie: the share of its traces that failed), and
//! danger bands over runs of steps whose failure share stands out from the run's usual.

use leptos::prelude::*;

use super::chart::{percent_of, LineChart};
use crate::ui::{api, format};
use treeline_wire::{StepActivity, StepsResponse};

/// The share of a step's traces with a failure in them.
fn share(s: &StepActivity) -> f64 {
    if s.traces <= 0 {
        return 0.0;
    }
    (s.errored as f64 / s.traces as f64).clamp(0.0, 1.0)
}

/// The run's usual failure share: the median over its steps.
fn usual_share(steps: &[StepActivity]) -> f64 {
    let mut shares: Vec<f64> = steps.iter().map(share).collect();
    shares.sort_by(f64::total_cmp);
    match shares.len() {
        0 => 0.0,
        n if n % 2 == 1 => shares[n / 2],
        n => (shares[n / 2 - 1] + shares[n / 2]) / 2.0,
    }
}

/// Whether a step's failure share stands out from the run's usual one: at least 20
/// points above it and at least twice it. A flaky tool failing one rollout in most
/// steps sets the usual; an outage where most fail stands out against it.
fn stands_out(share: f64, usual: f64) -> bool {
    share > 0.0 && share >= usual + 0.2 && share >= 2.0 * usual
}

/// Runs of consecutive covered steps whose failure share stands out, as (first, last).
pub fn danger_runs(steps: &[StepActivity]) -> Vec<(i64, i64)> {
    let usual = usual_share(steps);
    let mut runs: Vec<(i64, i64)> = Vec::new();
    let mut previous_failed = false;
    for s in steps {
        let failed = stands_out(share(s), usual);
        match runs.last_mut() {
            Some(last) if failed && previous_failed => last.1 = s.step,
            _ if failed => runs.push((s.step, s.step)),
            _ => {}
        }
        previous_failed = failed;
    }
    runs
}

fn marker_class(s: &StepActivity) -> &'static str {
    if s.errored > 0 {
        "marker errored"
    } else if s.running > 0 {
        "marker running"
    } else {
        "marker normal"
    }
}

fn marker_label(s: &StepActivity) -> String {
    let traces = if s.traces == 1 {
        "1 trace".to_string()
    } else {
        format!("{} traces", s.traces)
    };
    let mut label = format!("step {}: {traces}", s.step);
    if s.errored > 0 {
        label.push_str(&format!(
            ", {} failed ({})",
            s.errored,
            format::percent(share(s))
        ));
    }
    if s.running > 0 {
        label.push_str(&format!(", {} running", s.running));
    }
    label
}

/// The metric the lane shows first: the run's reward, else its return, else the
/// first it logged. A reward dip is what a person opens the lane to explain.
pub(crate) fn preferred_metric(keys: &[String]) -> Option<String> {
    ["reward", "return"]
        .iter()
        .find_map(|word| keys.iter().find(|k| format::lowercase(k).contains(word)))
        .or_else(|| keys.first())
        .cloned()
}

/// The step axis of the lane, which the panels below it share: its first step to
/// its last (one past the first at least).
pub fn domain(steps: &[StepActivity]) -> (i64, i64) {
    let x0 = steps.first().map_or(0, |s| s.step);
    (x0, steps.last().map_or(1, |s| s.step).max(x0 + 1))
}

#[component]
pub fn Timeline(
    run_id: String,
    activity: StepsResponse,
    metric_keys: Vec<String>,
    /// The pinned step, if any.
    pinned: Signal<Option<i64>>,
    on_pick: Callback<i64>,
    /// The step range what-changed compares, if one is chosen.
    range: Signal<Option<(i64, i64)>>,
    /// A range dragged across the plot.
    on_range: Callback<(i64, i64)>,
) -> impl IntoView {
    let totals = activity.totals;
    let steps = activity.steps;
    let (x0, x1) = domain(&steps);
    // A drag across the plot, as fractions of its width: where it started, where the
    // pointer is. Read with `try_`: a pointer event can outlive the plot.
    let drag = RwSignal::new(None::<(f64, f64)>);
    // A drag just ended: the click that may follow is not a click on a marker.
    let dragged = RwSignal::new(false);
    let plot = NodeRef::<leptos::html::Div>::new();
    let fraction = move |ev: &leptos::ev::MouseEvent| -> Option<f64> {
        let r = plot.get_untracked()?.get_bounding_client_rect();
        (r.width() > 0.0)
            .then(|| ((f64::from(ev.client_x()) - r.left()) / r.width()).clamp(0.0, 1.0))
    };
    let step_at = move |f: f64| (x0 + (f * (x1 - x0) as f64).round() as i64).clamp(x0, x1);
    let on_down = move |ev: leptos::ev::MouseEvent| {
        if ev.button() == 0 {
            if let Some(f) = fraction(&ev) {
                drag.try_set(Some((f, f)));
            }
        }
    };
    let on_move = move |ev: leptos::ev::MouseEvent| {
        if let (Some((start, _)), Some(f)) = (drag.try_get_untracked().flatten(), fraction(&ev)) {
            drag.try_set(Some((start, f)));
        }
    };
    let on_up = move |ev: leptos::ev::MouseEvent| {
        let Some((start, _)) = drag.try_get_untracked().flatten() else {
            return;
        };
        drag.try_set(None);
        let (Some(end), Some(width)) = (
            fraction(&ev),
            plot.get_untracked()
                .map(|p| p.get_bounding_client_rect().width()),
        ) else {
            return;
        };
        // Four pixels or more: a drag, not a click that shook.
        if (end - start).abs() * width >= 4.0 {
            let (a, b) = (step_at(start.min(end)), step_at(start.max(end)));
            dragged.try_set(true);
            on_range.run((a, b));
        }
    };
    let dragging = move || {
        drag.get().filter(|(a, b)| a != b).map(|(a, b)| {
            let (lo, hi) = (a.min(b), a.max(b));
            let label = format!("steps {}–{}", step_at(lo), step_at(hi));
            view! {
                <div class="drag-range" style=format!("left: {:.3}%; width: {:.3}%", lo * 100.0, (hi - lo) * 100.0)>
                    <span>{label}</span>
                </div>
            }
        })
    };
    let chosen = move || {
        range.get().map(|(a, b)| {
            let left = percent_of(a, x0, x1);
            let width = (percent_of(b, x0, x1) - left).max(0.6);
            view! {
                <div class="range-band" title=format!("steps {a}–{b}: what changed compares them with the steps before")
                    style=format!("left: calc({left:.3}% - 3px); width: calc({width:.3}% + 6px)")></div>
            }
        })
    };
    let busiest = steps.iter().map(|s| s.traces).max().unwrap_or(1).max(1) as f64;
    let metric = RwSignal::new(preferred_metric(&metric_keys));
    let series = {
        let run_id = run_id.clone();
        Resource::new(
            move || metric.get(),
            move |key| {
                let run_id = run_id.clone();
                async move {
                    match key {
                        Some(key) => api::metric(run_id, key, 1_000).await.map(Some),
                        None => Ok(None),
                    }
                }
            },
        )
    };
    let range = match (totals.min_step, totals.max_step) {
        (Some(a), Some(b)) => format!("steps {a}–{b}"),
        _ => "no steps".to_string(),
    };
    let note = activity.truncated.then(|| view! {
        <p class="note" role="note">
            {format!("The lane covers the first {} distinct steps (up to step {x1}); this run has more.", activity.limit)}
        </p>
    });
    let bands = danger_runs(&steps);
    let usual = format::percent(usual_share(&steps));
    view! {
        <div class="timeline">
            <div class="timeline-head">
                <span class="total">{format!("{} traces", totals.traces)}</span>
                <span class="errored">{format!("{} errored", totals.errored)}</span>
                {(totals.running > 0).then(|| view! { <span class="running">{format!("{} running", totals.running)}</span> })}
                {(totals.unstepped > 0).then(|| view! { <span class="unstepped">{format!("{} without a step", totals.unstepped)}</span> })}
                <span class="range">{range}</span>
                <label class="metric-select">
                    "Metric "
                    <select on:change=move |ev| {
                        let v = event_target_value(&ev);
                        metric.set((!v.is_empty()).then_some(v));
                    }>
                        {metric_keys.iter().map(|k| {
                            let key = k.clone();
                            view! { <option value=k.clone() selected=move || metric.get().as_deref() == Some(key.as_str())>{k.clone()}</option> }
                        }).collect_view()}
                        <option value="">"none"</option>
                    </select>
                </label>
            </div>
            <div class="timeline-plot" node_ref=plot on:mousedown=on_down on:mousemove=on_move on:mouseup=on_up
                on:mouseleave=move |_| { drag.try_set(None); }
                title="Drag across the steps to see what changed in them">
                {chosen}
                {dragging}
                {bands.into_iter().map(|(a, b)| {
                    let left = percent_of(a, x0, x1);
                    let width = (percent_of(b, x0, x1) - left).max(0.6);
                    view! {
                        <div class="danger-band" title=format!("steps {a}–{b}: a share of failing traces well above the run's usual ({usual})")
                            style=format!("left: calc({left:.3}% - 3px); width: calc({width:.3}% + 6px)")></div>
                    }
                }).collect_view()}
                <Suspense fallback=|| view! { <div class="chart-placeholder">"Loading metric…"</div> }>
                    {move || Suspend::new(async move {
                        match series.await {
                            Ok(Some(s)) => view! { <LineChart label=s.key points=s.points domain=(x0, x1)/> }.into_any(),
                            Ok(None) => view! { <div class="chart-placeholder">"No metric chosen."</div> }.into_any(),
                            Err(e) => view! { <p class="error">{e.message}</p> }.into_any(),
                        }
                    })}
                </Suspense>
                <div class="lane" role="group" aria-label="Trace activity per step">
                    {steps.iter().map(|s| {
                        let size = 6.0 + 12.0 * (s.traces as f64 / busiest).sqrt();
                        let step = s.step;
                        let left = percent_of(step, x0, x1);
                        view! {
                            <button
                                class=marker_class(s)
                                class:pinned=move || pinned.get() == Some(step)
                                style=format!("left: {left:.3}%; width: {size:.1}px; height: {size:.1}px; --share: {:.3}", share(s))
                                aria-label=marker_label(s)
                                title=marker_label(s)
                                on:click=move |_| {
                                    if dragged.try_get_untracked() == Some(true) {
                                        dragged.try_set(false);
                                    } else {
                                        on_pick.run(step);
                                    }
                                }
                            ></button>
                        }
                    }).collect_view()}
                </div>
            </div>
            {note}
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lane_prefers_reward_then_return() {
        let keys = |ks: &[&str]| ks.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        assert_eq!(
            preferred_metric(&keys(&["loss", "train/reward_mean", "return"])).as_deref(),
            Some("train/reward_mean")
        );
        assert_eq!(
            preferred_metric(&keys(&["loss", "episode_Return"])).as_deref(),
            Some("episode_Return")
        );
        assert_eq!(
            preferred_metric(&keys(&["loss", "kl"])).as_deref(),
            Some("loss")
        );
        assert_eq!(preferred_metric(&[]), None);
    }

    fn step(step: i64, errored: i64) -> StepActivity {
        StepActivity {
            step,
            traces: 1,
            errored,
            running: 0,
        }
    }

    #[test]
    fn consecutive_failing_steps_make_one_band() {
        let steps = [
            step(1, 0),
            step(2, 1),
            step(3, 2),
            step(4, 0),
            step(6, 1),
            step(7, 0),
        ];
        assert_eq!(danger_runs(&steps), vec![(2, 3), (6, 6)]);
        assert_eq!(
            marker_label(&step(42, 1)),
            "step 42: 1 trace, 1 failed (100%)"
        );
    }

    #[test]
    fn a_band_marks_an_outage_not_a_flaky_tool() {
        // One rollout in 32 fails at most steps; at steps 12-16, 24 of 32 do.
        let steps: Vec<StepActivity> = (0..30)
            .map(|i| StepActivity {
                step: i,
                traces: 32,
                errored: match i {
                    12..=16 => 24,
                    i if i % 5 == 0 => 0,
                    _ => 1,
                },
                running: 0,
            })
            .collect();
        assert_eq!(danger_runs(&steps), vec![(12, 16)]);
        assert_eq!(
            marker_label(&steps[13]),
            "step 13: 32 traces, 24 failed (75%)"
        );
        assert_eq!(marker_label(&steps[1]), "step 1: 32 traces, 1 failed (3%)");
    }
}
