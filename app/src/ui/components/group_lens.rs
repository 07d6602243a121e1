//! The group lens of Run Detail: samples scored together (a GRPO group), the share
//! of groups per step whose samples all scored the same, and one step's groups by
//! spread, each opening in Compare or as best against worst in the diff.

use leptos::prelude::*;

use crate::ui::client_data::ClientData;
use treeline_wire::filter::AttributeKeys;
use treeline_wire::groups::{Group, GroupBy, Groups, GroupsQuery, GROUPS_LISTED_DEFAULT};

use super::chart::LineChart;
use super::{choose_when_keys_arrive, RunKeys};
use crate::ui::api;
use crate::ui::compare_url::CompareUrl;
use crate::ui::format;

/// The first grouping offered: a root attribute named like a group, else the
/// children of each root (a prompt id may recur across steps: it is offered, not
/// chosen).
fn preferred_by(keys: &AttributeKeys) -> String {
    ["group_id", "group"]
        .iter()
        .find(|name| keys.names("string").any(|k| k == **name))
        .map_or_else(|| "children".to_string(), |k| format!("attr.{k}"))
}

/// A score to three decimals at most: 0.959, not 0.95875.
fn score(v: f64) -> String {
    format::decimals(v, 3)
}

/// The zero-spread share per step, as a series.
fn zero_spread_share(groups: &Groups) -> Vec<(i64, f64)> {
    groups
        .steps
        .iter()
        .filter(|s| s.groups > 0)
        .map(|s| (s.step, s.zero_spread as f64 / s.groups as f64))
        .collect()
}

/// Compare of the group's ranked samples, best first, marked by the score.
fn compare_href(run_id: &str, value: &str, g: &Group) -> String {
    CompareUrl {
        run_id: Some(run_id.to_string()),
        spans: g
            .ranked
            .iter()
            .map(|s| (s.trace_id.clone(), s.span_id.clone()))
            .collect(),
        by: Some(value.to_string()),
        order: Some("desc".into()),
        ..Default::default()
    }
    .href()
}

/// The diff of the group's best sample against its worst.
fn diff_href(run_id: &str, g: &Group) -> Option<String> {
    let (best, worst) = (g.ranked.first()?, g.ranked.last()?);
    (g.ranked.len() >= 2).then(|| {
        CompareUrl {
            run_id: Some(run_id.to_string()),
            spans: vec![
                (best.trace_id.clone(), best.span_id.clone()),
                (worst.trace_id.clone(), worst.span_id.clone()),
            ],
            diff: true,
            ..Default::default()
        }
        .href()
    })
}

#[component]
pub fn GroupLens(
    run_id: String,
    domain: (i64, i64),
    /// The timeline's pinned step: its groups are listed.
    pinned: Signal<Option<i64>>,
    /// The run's root-attribute keys, for the pickers.
    keys: RunKeys,
) -> impl IntoView {
    let by = RwSignal::new(None::<String>);
    let score = RwSignal::new("reward".to_string());
    choose_when_keys_arrive(keys, by, preferred_by);
    let groups = {
        let run_id = run_id.clone();
        ClientData::new(move || {
            let (run_id, by, score, step) = (run_id.clone(), by.get(), score.get(), pinned.get());
            async move {
                let by = by?;
                let by = match by.strip_prefix("attr.") {
                    Some(key) => GroupBy::Attr(key.to_string()),
                    None => GroupBy::Children,
                };
                let query = GroupsQuery {
                    list: Default::default(),
                    by,
                    value: score,
                    step,
                    limit: GROUPS_LISTED_DEFAULT,
                };
                Some(api::groups(run_id, query).await)
            }
        })
    };
    let options = move |kind: &'static str| -> Vec<String> {
        keys.with(|k| match k {
            Some(Ok(k)) => k.names(kind).map(str::to_string).collect(),
            _ => Vec::new(),
        })
    };
    view! {
        <section class="group-lens" aria-labelledby="groups-title">
            <div class="rollouts-head">
                <h3 id="groups-title">"Groups"</h3>
                <label>
                    "Samples grouped by "
                    <select on:change=move |ev| by.set(Some(event_target_value(&ev)))>
                        <option value="children" selected=move || by.get().as_deref() == Some("children")>"the children of each root"</option>
                        {move || options("string").into_iter().map(|k| {
                            let v = format!("attr.{k}");
                            let selected = by.get().as_deref() == Some(v.as_str());
                            view! { <option value=v.clone() selected=selected>{v.clone()}</option> }
                        }).collect_view()}
                    </select>
                </label>
                <label>
                    "Score "
                    <select on:change=move |ev| score.set(event_target_value(&ev))>
                        {move || {
                            let mut names = options("number");
                            if !names.contains(&score.get()) {
                                names.insert(0, score.get());
                            }
                            names.into_iter().map(|k| {
                                let selected = score.get() == k;
                                view! { <option value=k.clone() selected=selected>{format!("attr.{k}")}</option> }
                            }).collect_view()
                        }}
                    </select>
                </label>
            </div>
            {move || match groups.get() {
                None | Some(None) => view! { <p class="loading">"Loading groups…"</p> }.into_any(),
                Some(Some(Err(e))) => view! { <p class="error" role="alert">{e.message}</p> }.into_any(),
                Some(Some(Ok(g))) => view! { <GroupsView run_id=run_id.clone() groups=g domain/> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn GroupsView(run_id: String, groups: Groups, domain: (i64, i64)) -> impl IntoView {
    if let Some(empty) = groups.empty.clone() {
        return view! { <p class="muted">{format!("No groups: {empty}.")}</p> }.into_any();
    }
    let share = zero_spread_share(&groups);
    let value = groups.value.trim_start_matches("attr.").to_string();
    let step = groups.step;
    let more = groups.groups_more;
    let count = groups.groups.len();
    let rows = groups.groups;
    view! {
        <div class="timeline-plot">
            <LineChart label="Share of groups with no spread (every sample scored the same)" points=share domain/>
        </div>
        <table class="groups">
            <caption>{match step {
                Some(s) => format!("Step {s}: {} groups{}, least spread first", format::count(count as i64), if more { " (the first)" } else { "" }),
                None => "Groups without a step".to_string(),
            }}</caption>
            <thead><tr>
                <th scope="col">"Group"</th><th scope="col">"Samples"</th><th scope="col">"Mean"</th>
                <th scope="col">"Spread"</th><th scope="col">"Best"</th><th scope="col">"Worst"</th>
                <th scope="col"><span class="visually-hidden">"Links"</span></th>
            </tr></thead>
            <tbody>
                {rows.into_iter().map(|g| {
                    let compare = compare_href(&run_id, &value, &g);
                    let diff = diff_href(&run_id, &g);
                    let best = g.ranked.first().map(|s| score(s.value)).unwrap_or_default();
                    let worst = g.ranked.last().map(|s| score(s.value)).unwrap_or_default();
                    view! {
                        <tr class:flat=g.spread == 0.0>
                            <td><code>{g.key.clone()}</code></td>
                            <td>{g.size}</td>
                            <td>{score(g.mean)}</td>
                            <td>{if g.spread == 0.0 { "none".to_string() } else { score(g.spread) }}</td>
                            <td>{best}</td>
                            <td>{worst}</td>
                            <td class="links">
                                <a href=compare aria-label=format!("Compare the samples of group {}", g.key)>"Compare"</a>
                                {diff.map(|d| view! { <a href=d aria-label=format!("Best against worst in group {}", g.key)>"Best vs worst"</a> })}
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;
    use treeline_wire::filter::AttributeKey;
    use treeline_wire::groups::{GroupStep, Sample};

    #[test]
    fn groups_default_to_a_group_attribute_then_children() {
        let key = |k: &str| AttributeKey {
            key: k.into(),
            kind: "string".into(),
            traces: 1,
            min: None,
            max: None,
            values: Vec::new(),
        };
        let keys = |ks: Vec<AttributeKey>| AttributeKeys {
            attributes: ks,
            ..Default::default()
        };
        assert_eq!(
            preferred_by(&keys(vec![key("prompt_id"), key("group_id")])),
            "attr.group_id"
        );
        assert_eq!(preferred_by(&keys(vec![key("prompt_id")])), "children");
    }

    #[test]
    fn links_open_the_ranked_samples_and_best_against_worst() {
        let sample = |t: &str, v: f64| Sample {
            trace_id: t.into(),
            span_id: "root".into(),
            value: v,
        };
        let g = Group {
            key: "g".into(),
            step: Some(3),
            size: 3,
            mean: 0.5,
            spread: 0.4,
            ranked: vec![sample("a", 1.0), sample("b", 0.5), sample("c", 0.0)],
        };
        assert_eq!(
            compare_href("r", "reward", &g),
            "/compare?run_id=r&spans=a%3Aroot%2Cb%3Aroot%2Cc%3Aroot&by=reward&order=desc"
        );
        assert_eq!(
            diff_href("r", &g).as_deref(),
            Some("/compare?run_id=r&spans=a%3Aroot%2Cc%3Aroot&diff=1")
        );
        let groups = Groups {
            steps: vec![
                GroupStep {
                    step: 1,
                    groups: 4,
                    zero_spread: 1,
                },
                GroupStep {
                    step: 2,
                    groups: 0,
                    zero_spread: 0,
                },
            ],
            ..Groups::default()
        };
        assert_eq!(zero_spread_share(&groups), [(1, 0.25)]);
        assert_eq!(
            (score(0.95875), score(1.0), score(0.5)),
            ("0.959".into(), "1".into(), "0.5".into())
        );
    }
}
