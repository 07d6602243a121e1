//! The Rollouts panel of Run Detail: a value's distribution over the steps as a
//! heatmap (colour = traces in a cell) with the median and the p10–p90 band over it,
//! on the step axis the timeline uses, split into one small heatmap per value of a
//! string attribute. A cell, or a dragged rectangle, opens exactly its traces; the
//! arrow keys move a focused cell and Enter opens it.

mod grid;

use leptos::prelude::*;

use crate::ui::client_data::ClientData;
use leptos_router::hooks::use_navigate;
use treeline_wire::filter::{AttributeKeys, Total};
use treeline_wire::stats::{
    Measure, StatSeries, Stats, StatsQuery, DEFAULT_BINS, MAX_STEP_BUCKETS,
};

use super::chart::{percent_of, short, step_ticks};
use super::{choose_when_keys_arrive, RunKeys};
use crate::ui::api;
use crate::ui::format;
use grid::Frame;

const MAIN_HEIGHT: f64 = 200.0;
const SMALL_HEIGHT: f64 = 80.0;

/// The value first shown: a reward, else a return, else the first numeric
/// attribute, else the duration.
fn preferred_value(keys: &AttributeKeys) -> String {
    let numbers: Vec<&str> = keys.names("number").collect();
    ["reward", "return"]
        .iter()
        .find_map(|word| numbers.iter().find(|k| format::lowercase(k).contains(word)))
        .or(numbers.first())
        .map_or_else(
            || Total::Duration.name().to_string(),
            |k| format!("attr.{k}"),
        )
}

#[component]
pub fn Rollouts(
    run_id: String,
    domain: (i64, i64),
    /// The run's root-attribute keys, for the pickers.
    keys: RunKeys,
) -> impl IntoView {
    let value = RwSignal::new(None::<String>);
    let split = RwSignal::new(None::<String>);
    choose_when_keys_arrive(keys, value, preferred_value);
    let stats = {
        let run_id = run_id.clone();
        ClientData::new(move || {
            let (run_id, value, split) = (run_id.clone(), value.get(), split.get());
            async move {
                let value = value?;
                let query = StatsQuery {
                    list: Default::default(),
                    value: match Measure::parse(&value, "value") {
                        Ok(m) => m,
                        Err(e) => return Some(Err(e.into())),
                    },
                    split: split.and_then(|s| s.strip_prefix("attr.").map(str::to_string)),
                    buckets: MAX_STEP_BUCKETS,
                    bins: DEFAULT_BINS,
                };
                Some(api::stats(run_id, query).await)
            }
        })
    };
    let options = move |kind: &'static str| -> Vec<String> {
        keys.with(|k| match k {
            Some(Ok(k)) => k.names(kind).map(|n| format!("attr.{n}")).collect(),
            _ => Vec::new(),
        })
    };
    let totals: Vec<&'static str> = Measure::TOTALS.iter().map(|t| t.name()).collect();
    view! {
        <section class="rollouts" aria-labelledby="rollouts-title">
            <div class="rollouts-head">
                <h3 id="rollouts-title">"Rollouts"</h3>
                <label>
                    "Value "
                    <select on:change=move |ev| value.set(Some(event_target_value(&ev)))>
                        <optgroup label="Root attributes">
                            {move || options("number").into_iter().map(|k| {
                                let selected = value.get().as_deref() == Some(k.as_str());
                                view! { <option value=k.clone() selected=selected>{k.clone()}</option> }
                            }).collect_view()}
                        </optgroup>
                        <optgroup label="Totals">
                            {totals.iter().map(|t| {
                                let t = *t;
                                view! { <option value=t selected=move || value.get().as_deref() == Some(t)>{t}</option> }
                            }).collect_view()}
                        </optgroup>
                    </select>
                </label>
                <label>
                    "Split by "
                    <select on:change=move |ev| {
                        let v = event_target_value(&ev);
                        split.set((!v.is_empty()).then_some(v));
                    }>
                        <option value="" selected=move || split.get().is_none()>"nothing"</option>
                        {move || options("string").into_iter().map(|k| {
                            let selected = split.get().as_deref() == Some(k.as_str());
                            view! { <option value=k.clone() selected=selected>{k.clone()}</option> }
                        }).collect_view()}
                    </select>
                </label>
                <span class="legend" aria-hidden="true">
                    <span class="swatch low"></span>"fewer traces"
                    <span class="swatch high"></span>"more"
                    <span class="swatch median"></span>"median"
                    <span class="swatch band"></span>"p10–p90"
                </span>
            </div>
            {move || match stats.get() {
                None | Some(None) => view! { <p class="loading">"Loading the distribution…"</p> }.into_any(),
                Some(Some(Err(e))) => view! { <p class="error" role="alert">{e.message}</p> }.into_any(),
                Some(Some(Ok(stats))) => view! { <Maps run_id=run_id.clone() stats domain/> }.into_any(),
            }}
        </section>
    }
}

/// The whole list's heatmap, then one small one per split value.
#[component]
fn Maps(run_id: String, stats: Stats, domain: (i64, i64)) -> impl IntoView {
    if let Some(empty) = stats.empty.clone() {
        return view! { <p class="muted">{format!("Nothing to draw: {empty}.")}</p> }.into_any();
    }
    let frame = |height| Frame {
        x0: domain.0,
        x1: domain.1,
        edges: stats.edges.clone(),
        height,
    };
    let value = stats.value.clone();
    let mut series = stats.series.into_iter();
    let whole = series.next();
    let left_out = (stats.left_out > 0).then(|| {
        format!(
            "{} traces at a step have no {value} and are left out.",
            format::count(stats.left_out)
        )
    });
    let splits: Vec<StatSeries> = series.collect();
    view! {
        {whole.map(|s| {
            let title = format!("{value} by step, {} traces", format::count(s.traces));
            view! { <Heatmap run_id=run_id.clone() value=value.clone() series=s frame=frame(MAIN_HEIGHT) title axis=true/> }
        })}
        {left_out.map(|t| view! { <p class="note">{t}</p> })}
        {(!splits.is_empty()).then(|| view! {
            <div class="small-maps">
                {splits.into_iter().map(|s| {
                    let name = match (&s.label, s.other) {
                        (Some(l), _) => l.clone(),
                        (None, true) => "other values".to_string(),
                        (None, false) => "all".to_string(),
                    };
                    let title = format!("{name}: {} traces", format::count(s.traces));
                    view! { <Heatmap run_id=run_id.clone() value=value.clone() series=s frame=frame(SMALL_HEIGHT) title axis=false/> }
                }).collect_view()}
            </div>
        })}
    }
    .into_any()
}

/// What a heatmap draws and links to.
struct Map {
    series: StatSeries,
    frame: Frame,
    run_id: String,
    value: String,
}

impl Map {
    /// The workspace link of the cells from `a` to `b`: their steps and bins.
    fn link(&self, a: (usize, usize), b: (usize, usize)) -> Option<String> {
        let first = self.series.buckets.get(a.0.min(b.0))?;
        let last = self.series.buckets.get(a.0.max(b.0))?;
        Some(grid::link(
            &self.run_id,
            &self.value,
            &self.series,
            &self.frame.edges,
            (first.first_step, last.last_step),
            (a.1.min(b.1), a.1.max(b.1)),
        ))
    }
}

/// One heatmap with its focused (or hovered) cell laid over it as a link.
#[component]
fn Heatmap(
    run_id: String,
    value: String,
    series: StatSeries,
    frame: Frame,
    title: String,
    /// Whether to label the step axis (the main map; the small ones share it).
    axis: bool,
) -> impl IntoView {
    let svg = frame.svg(&series);
    let labels = frame.value_labels();
    let (x0, x1) = (frame.x0, frame.x1);
    // Read with `try_` throughout: an event can arrive (a blur as a link is followed)
    // after the map is gone.
    let map = StoredValue::new(Map {
        series,
        frame,
        run_id,
        value,
    });
    // (bucket index, bin) of the cell the pointer or the keys are on.
    let active = RwSignal::new(None::<(usize, usize)>);
    let dragged_from = RwSignal::new(None::<(usize, usize)>);
    // A drag just ended: the click that follows is not a click on its last cell.
    let dragged = RwSignal::new(false);
    let surface = NodeRef::<leptos::html::Div>::new();
    let navigate = use_navigate();
    let cell_at = move |ev: &leptos::ev::MouseEvent| -> Option<(usize, usize)> {
        let el = surface.get_untracked()?;
        let r = el.get_bounding_client_rect();
        if r.width() <= 0.0 || r.height() <= 0.0 {
            return None;
        }
        let fx = (f64::from(ev.client_x()) - r.left()) / r.width();
        let fy = (f64::from(ev.client_y()) - r.top()) / r.height();
        map.try_with_value(|m| Some((m.frame.bucket_at(&m.series, fx)?, m.frame.bin_at(fy))))
            .flatten()
    };
    // The link of a range of cells: their steps and their bins.
    let href = move |a: (usize, usize), b: (usize, usize)| -> Option<String> {
        map.try_with_value(|m| m.link(a, b)).flatten()
    };
    let described = move || {
        let (b, bin) = active.try_get().flatten()?;
        map.try_with_value(|m| {
            let bucket = m.series.buckets.get(b)?;
            Some(grid::describe(&m.value, &m.frame.edges, bucket, bin))
        })
        .flatten()
    };
    let on_key = {
        let navigate = navigate.clone();
        move |ev: leptos::ev::KeyboardEvent| {
            let Some((buckets, bins)) =
                map.try_with_value(|m| (m.series.buckets.len(), m.frame.bins()))
            else {
                return;
            };
            if buckets == 0 {
                return;
            }
            // A bucket's median bin: where a move along the steps lands.
            let median_bin = move |b: usize| {
                map.try_with_value(|m| {
                    m.series.buckets.get(b).map_or(0, |bucket| {
                        m.frame.bin_at(m.frame.y(bucket.p50) / m.frame.height)
                    })
                })
                .unwrap_or(0)
            };
            let current = active.try_get_untracked().flatten();
            let start = current.unwrap_or_else(|| (0, median_bin(0)));
            let along = |b: usize| Some((b, median_bin(b)));
            let moved = match ev.key().as_str() {
                "ArrowLeft" => along(start.0.saturating_sub(1)),
                "ArrowRight" => along((start.0 + 1).min(buckets - 1)),
                "ArrowUp" => Some((start.0, (start.1 + 1).min(bins - 1))),
                "ArrowDown" => Some((start.0, start.1.saturating_sub(1))),
                "Home" => along(0),
                "End" => along(buckets - 1),
                "Enter" => {
                    if let Some(h) = current.and_then(|c| href(c, c)) {
                        navigate(&h, Default::default());
                    }
                    None
                }
                _ => return,
            };
            ev.prevent_default();
            if let Some(cell) = moved {
                active.try_set(Some(cell));
            }
        }
    };
    let on_up = move |ev: leptos::ev::MouseEvent| {
        let from = dragged_from.try_get_untracked().flatten();
        let (Some(from), Some(to)) = (from, cell_at(&ev)) else {
            return;
        };
        dragged_from.try_set(None);
        if from != to {
            dragged.try_set(true);
            ev.prevent_default();
            if let Some(h) = href(from, to) {
                navigate(&h, Default::default());
            }
        }
    };
    let aria = format!(
        "{title}. Colour is the number of traces in a cell. Left and right move along \
         the steps to each bucket's median, up and down between values; Enter opens a \
         cell's traces."
    );
    view! {
        <figure class="heatmap" class:small=!axis>
            <figcaption>{title.clone()}</figcaption>
            <div class="heatmap-frame">
                <div class="heatmap-surface" node_ref=surface tabindex="0"
                    role="group" aria-roledescription="heatmap" aria-label=aria
                    on:mousemove=move |ev| {
                        if let Some(c) = cell_at(&ev) { active.try_set(Some(c)); }
                    }
                    on:mousedown=move |ev| { dragged.try_set(false); dragged_from.try_set(cell_at(&ev)); }
                    on:mouseup=on_up
                    on:mouseleave=move |_| { dragged_from.try_set(None); active.try_set(None); }
                    on:keydown=on_key
                    on:blur=move |_| { active.try_set(None); }>
                    <div class="heatmap-cells" aria-hidden="true" inner_html=svg></div>
                    {move || active.try_get().flatten().and_then(|c| {
                        let rect = map.try_with_value(|m| {
                            m.series.buckets.get(c.0).map(|b| (m.frame.cell(b, c.1), m.frame.height))
                        }).flatten()?;
                        let link = href(c, c)?;
                        Some(view! {
                            <a class="heatmap-cell" href=link tabindex="-1" draggable="false"
                                on:click=move |ev| if dragged.try_get_untracked().unwrap_or(false) { ev.prevent_default(); }
                                aria-label=described().unwrap_or_default()
                                style=rect.0.style(rect.1)></a>
                        })
                    })}
                    <div class="heatmap-values" aria-hidden="true">
                        {labels.into_iter().map(|(v, top)| view! {
                            <span style=format!("top: {top:.2}%")>{short(v)}</span>
                        }).collect_view()}
                    </div>
                </div>
            </div>
            {axis.then(|| view! {
                <div class="chart-axis" aria-hidden="true">
                    {step_ticks(x0, x1).into_iter().map(|step| {
                        let pct = percent_of(step, x0, x1);
                        let shift = if pct < 6.0 { 0.0 } else if pct > 94.0 { -100.0 } else { -50.0 };
                        view! { <span style=format!("left: {pct:.3}%; transform: translateX({shift}%)")>{format!("step {step}")}</span> }
                    }).collect_view()}
                </div>
            })}
            <p class="heatmap-readout" role="status">{move || described().unwrap_or_default()}</p>
        </figure>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use treeline_wire::filter::AttributeKey;

    fn key(key: &str, kind: &str) -> AttributeKey {
        AttributeKey {
            key: key.into(),
            kind: kind.into(),
            traces: 1,
            min: None,
            max: None,
            values: Vec::new(),
        }
    }

    #[test]
    fn the_first_value_shown_is_a_reward_or_a_return() {
        let keys = |ks: Vec<AttributeKey>| AttributeKeys {
            attributes: ks,
            ..Default::default()
        };
        assert_eq!(
            preferred_value(&keys(vec![
                key("seed", "number"),
                key("episode_return", "number")
            ])),
            "attr.episode_return"
        );
        assert_eq!(
            preferred_value(&keys(vec![key("reward", "string"), key("seed", "number")])),
            "attr.seed"
        );
        assert_eq!(preferred_value(&keys(vec![])), "duration_us");
    }
}
