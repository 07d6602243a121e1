//! What changed: a pinned step range against the steps just before it, as a ranked
//! list of what differs, each row with its figures before and after, how strong the
//! change is, and a link to example traces.

use leptos::prelude::*;

use crate::ui::client_data::ClientData;
use treeline_wire::changes::{ChangeKind, ChangeRow, Changes, ChangesQuery};
use treeline_wire::query::ListQuery;

use super::chart::short;
use crate::ui::url::WorkspaceUrl;
use crate::ui::{api, format};

/// What a row measures, in words.
fn measure(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Failures => "traces where it failed",
        ChangeKind::Count => "spans per trace",
        ChangeKind::Duration => "mean duration",
        ChangeKind::Tokens => "tokens per trace",
        ChangeKind::ErrorType => "traces with this error",
        ChangeKind::Number => "median",
        ChangeKind::Share => "traces with this value",
    }
}

/// A row's figure, as its kind reads.
fn figure(kind: ChangeKind, v: f64) -> String {
    match kind {
        ChangeKind::Failures | ChangeKind::ErrorType | ChangeKind::Share => format::percent(v),
        ChangeKind::Duration => format::duration(v.round() as i64),
        // 5.76 spans, not 5.7619.
        ChangeKind::Count | ChangeKind::Tokens => format::decimals(v, 2),
        ChangeKind::Number => short(v),
    }
}

/// The workspace list of a row's example traces in the pinned steps.
fn examples(run_id: &str, row: &ChangeRow, steps: (i64, i64)) -> String {
    WorkspaceUrl {
        run_id: Some(run_id.to_string()),
        filters: row.filters.clone(),
        min_step: Some(steps.0),
        max_step: Some(steps.1),
        ..Default::default()
    }
    .href()
}

#[component]
pub fn WhatChanged(
    run_id: String,
    /// The range offered first: the timeline's widest danger band, if any.
    suggested: Option<(i64, i64)>,
    /// A range chosen on the timeline (the page's `from` and `to`): asked at once.
    range: Signal<Option<(i64, i64)>>,
) -> impl IntoView {
    let first = range.get_untracked().or(suggested);
    let from = RwSignal::new(first.map(|s| s.0.to_string()).unwrap_or_default());
    let to = RwSignal::new(first.map(|s| s.1.to_string()).unwrap_or_default());
    // The range asked about: set by the button, the timeline or the suggestion, not
    // by typing.
    let asked = RwSignal::new(first);
    let section = NodeRef::<leptos::html::Section>::new();
    Effect::watch(
        move || range.get(),
        move |chosen, _, _| {
            if let Some((a, b)) = *chosen {
                from.set(a.to_string());
                to.set(b.to_string());
                asked.set(Some((a, b)));
                // The answer is below the fold of the timeline it was asked from.
                if let Some(el) = section.get_untracked() {
                    el.scroll_into_view();
                }
            }
        },
        false,
    );
    let problem = RwSignal::new(None::<String>);
    let answer = {
        let run_id = run_id.clone();
        ClientData::new(move || {
            let (run_id, asked) = (run_id.clone(), asked.get());
            async move {
                let steps = asked?;
                Some(
                    match ChangesQuery::new(ListQuery::default(), steps, (None, None)) {
                        Ok(query) => api::changes(run_id, query).await,
                        Err(e) => Err(e.into()),
                    },
                )
            }
        })
    };
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let parse = |s: RwSignal<String>| s.get_untracked().trim().parse::<i64>().ok();
        match (parse(from), parse(to)) {
            (Some(a), Some(b)) if a <= b && a >= 0 => {
                problem.set(None);
                asked.set(Some((a, b)));
            }
            (Some(a), Some(b)) if a > b => {
                problem.set(Some(format!("From ({a}) is past To ({b}).")))
            }
            _ => problem.set(Some(
                "From and To must be steps: whole numbers, 0 or more.".into(),
            )),
        }
    };
    view! {
        <section class="what-changed" aria-labelledby="changes-title" node_ref=section>
            <form class="rollouts-head" on:submit=submit>
                <h3 id="changes-title">"What changed"</h3>
                <label>"From step " <input type="number" min="0" name="from" prop:value=move || from.get() on:input=move |ev| from.set(event_target_value(&ev))/></label>
                <label>"to " <input type="number" min="0" name="to" prop:value=move || to.get() on:input=move |ev| to.set(event_target_value(&ev))/></label>
                <button type="submit">"Compare with the steps before"</button>
                {move || problem.get().map(|p| view! { <span class="error" role="alert">{p}</span> })}
            </form>
            {move || match answer.get() {
                None => view! { <p class="loading">"Comparing…"</p> }.into_any(),
                Some(None) => view! { <p class="muted">"Pick a step range (a dip, say) to see what differs from the steps just before it."</p> }.into_any(),
                Some(Some(Err(e))) => view! { <p class="error" role="alert">{e.message}</p> }.into_any(),
                Some(Some(Ok(c))) => view! { <ChangeList run_id=run_id.clone() changes=c/> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn ChangeList(run_id: String, changes: Changes) -> impl IntoView {
    let (steps, base) = (changes.steps, changes.baseline);
    let traces = |n: i64| match n {
        1 => "1 trace".to_string(),
        n => format!("{} traces", format::count(n)),
    };
    let head = format!(
        "Steps {}–{} ({}) against steps {}–{} ({})",
        steps.0,
        steps.1,
        traces(changes.traces),
        base.0,
        base.1,
        traces(changes.baseline_traces)
    );
    if let Some(empty) = changes.empty {
        return view! { <p class="muted">{format!("{head}: {empty}.")}</p> }.into_any();
    }
    let follow = (!changes.follow_step.is_empty()).then(|| {
        format!(
            "Left out, as they follow the step: {}.",
            changes.follow_step.join(", ")
        )
    });
    let none = changes.rows.is_empty();
    view! {
        <p class="changes-head">{head}</p>
        {none.then(|| view! { <p class="muted">"Nothing differs beyond the noise."</p> })}
        <ol class="changes">
            {changes.rows.into_iter().map(|row| {
                let link = examples(&run_id, &row, steps);
                let strength = format!("width: {:.1}%", row.strength * 100.0);
                let shift = row.shift.map(|d| format!(" ({d:+.1} spreads)")).unwrap_or_default();
                view! {
                    <li>
                        <span class="subject"><code>{row.subject.clone()}</code>
                            {row.span_kind.clone().map(|k| view! { <span class="kind">{k}</span> })}
                        </span>
                        <span class="measure">{measure(row.kind)}</span>
                        <span class="figures">{format!("{} → {}{shift}", figure(row.kind, row.before), figure(row.kind, row.after))}</span>
                        <span class="strength" title=format!("strength {:.2} of 1", row.strength)
                            role="img" aria-label=format!("strength {:.2} of 1", row.strength)>
                            <span style=strength></span>
                        </span>
                        <a href=link>"Examples"</a>
                    </li>
                }
            }).collect_view()}
        </ol>
        {follow.map(|f| view! { <p class="note">{f}</p> })}
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_their_kind() {
        assert_eq!(figure(ChangeKind::Failures, 0.5), "50%");
        assert_eq!(figure(ChangeKind::Number, 321.5), "321.5");
        assert_eq!(figure(ChangeKind::Count, 5.7619), "5.76");
        assert_eq!(figure(ChangeKind::Count, 10.0), "10");
        let row = ChangeRow {
            kind: ChangeKind::Failures,
            subject: "physics.integrate".into(),
            span_kind: None,
            before: 0.0,
            after: 1.0,
            strength: 1.0,
            shift: None,
            filters: vec!["span.name = physics.integrate".into()],
        };
        assert_eq!(
            examples("r", &row, (300, 340)),
            "/traces?run_id=r&filter=span.name%20%3D%20physics.integrate&min_step=300&max_step=340"
        );
    }
}
