//! The compared runs' configs as one table: the keys whose values differ first,
//! then the ones every run shares, folded away.

use std::collections::BTreeMap;

use leptos::prelude::*;
use serde_json::Value;

use super::run_chart::colour;

/// A config flattened to `a.b.c` paths, each with its value as text (strings
/// bare, everything else as JSON).
fn flatten(config: &Value, prefix: &str, out: &mut BTreeMap<String, String>) {
    match config {
        Value::Object(map) => {
            for (k, v) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(v, &path, out);
            }
        }
        Value::String(s) if !prefix.is_empty() => {
            out.insert(prefix.to_string(), s.clone());
        }
        other if !prefix.is_empty() => {
            out.insert(prefix.to_string(), other.to_string());
        }
        // A config that is not an object has no keys to line up.
        _ => {}
    }
}

/// A config key with each run's value (`None`: the run has no such key).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ConfigRow {
    pub key: String,
    pub values: Vec<Option<String>>,
}

impl ConfigRow {
    fn differs(&self) -> bool {
        self.values.windows(2).any(|w| w[0] != w[1])
    }
}

/// The rows whose values differ (a key some run lacks differs), then the rest;
/// each part by key.
pub(crate) fn config_rows(configs: &[&Value]) -> (Vec<ConfigRow>, Vec<ConfigRow>) {
    let flat: Vec<BTreeMap<String, String>> = configs
        .iter()
        .map(|c| {
            let mut out = BTreeMap::new();
            flatten(c, "", &mut out);
            out
        })
        .collect();
    let keys: std::collections::BTreeSet<&String> = flat.iter().flat_map(|f| f.keys()).collect();
    keys.into_iter()
        .map(|key| ConfigRow {
            key: key.clone(),
            values: flat.iter().map(|f| f.get(key).cloned()).collect(),
        })
        .partition(ConfigRow::differs)
}

#[component]
pub(crate) fn ConfigDiff(
    /// The runs' names, in the comparison's order.
    names: Vec<String>,
    configs: Vec<Value>,
) -> impl IntoView {
    let (differ, same) = config_rows(&configs.iter().collect::<Vec<_>>());
    if differ.is_empty() && same.is_empty() {
        return view! { <p class="muted">"None of these runs logged a config."</p> }.into_any();
    }
    let head = move || {
        view! {
            <thead>
                <tr>
                    <th scope="col">"Key"</th>
                    {names.iter().enumerate().map(|(i, n)| view! {
                        <th scope="col"><span class="swatch" style=format!("background: {}", colour(i))></span>{n.clone()}</th>
                    }).collect_view()}
                </tr>
            </thead>
        }
    };
    let body = |rows: Vec<ConfigRow>, differs: bool| {
        rows.into_iter()
            .map(|row| {
                view! {
                    <tr class:differs=differs>
                        <th scope="row"><code>{row.key}</code></th>
                        {row.values.into_iter().map(|v| match v {
                            Some(text) => view! { <td>{text}</td> }.into_any(),
                            None => view! { <td class="muted" title="not in this run's config">"—"</td> }.into_any(),
                        }).collect_view()}
                    </tr>
                }
            })
            .collect_view()
    };
    let (n_differ, n_same) = (differ.len(), same.len());
    let head_same = head.clone();
    view! {
        <div class="config-diff">
            {if n_differ == 0 {
                view! { <p class="muted">"Every config key has the same value in every run."</p> }.into_any()
            } else {
                view! {
                    <table class="data config-table" aria-label="Config keys that differ">
                        {head()}
                        <tbody>{body(differ, true)}</tbody>
                    </table>
                }.into_any()
            }}
            {(n_same > 0).then(|| view! {
                <details class="config-same">
                    <summary>{format!("{n_same} {} the same in every run", if n_same == 1 { "key" } else { "keys" })}</summary>
                    <table class="data config-table" aria-label="Config keys every run shares">
                        {head_same()}
                        <tbody>{body(same, false)}</tbody>
                    </table>
                </details>
            })}
        </div>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differing_keys_come_first_and_a_missing_key_differs() {
        let a = json!({"lr": 0.1, "seed": 0, "model": {"name": "q", "layers": 4}});
        let b = json!({"lr": 0.1, "seed": 1, "model": {"name": "q"}});
        let (differ, same) = config_rows(&[&a, &b]);
        let keys = |rows: &[ConfigRow]| rows.iter().map(|r| r.key.clone()).collect::<Vec<_>>();
        assert_eq!(keys(&differ), ["model.layers", "seed"]);
        assert_eq!(keys(&same), ["lr", "model.name"]);
        assert_eq!(differ[0].values, [Some("4".to_string()), None]);
        assert_eq!(
            same[1].values,
            [Some("q".to_string()), Some("q".to_string())]
        );
        // No config at all has no keys.
        assert_eq!(config_rows(&[&json!(null), &json!({})]), (vec![], vec![]));
    }
}
