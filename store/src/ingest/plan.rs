use std::collections::BTreeMap;

// Span ids are hashed several times per event: foldhash, seeded per map, costs a
// fraction of the default SipHash and still varies its seed against crafted ids.
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use serde_json::{Map, Value};
use treeline_wire::{
    Body, CloseEvent, OpenEvent, SpanEvent, SpanKind, SpanLink, SpanStatus, Warning, MAX_ATTRIBUTES,
};

use super::sizes;
use super::state::{Activity, SpanState, TraceState};

/// Reads the current state of rows a batch touches, inside the batch's transaction.
#[allow(
    async_fn_in_trait,
    reason = "only used inside this crate, with concrete types whose futures are Send"
)]
pub trait Loader {
    type Error;
    /// The spans among `keys` (trace id, span id) that exist; missing ones are left out.
    async fn load_spans(
        &mut self,
        keys: &[(String, String)],
    ) -> Result<Vec<SpanState>, Self::Error>;
    async fn load_traces(&mut self, trace_ids: &[String]) -> Result<Vec<TraceState>, Self::Error>;
    /// The names of a stored span's attributes (none if it is not stored).
    async fn load_attribute_names(
        &mut self,
        trace_id: &str,
        span_id: &str,
    ) -> Result<Vec<String>, Self::Error>;
}

/// One span row to upsert: its full new state plus what to merge into the stored
/// bodies and attributes.
#[derive(Debug)]
pub struct SpanWrite {
    pub state: SpanState,
    /// The attribute count the span had when loaded: names stored before this batch.
    pub stored_attrs: i64,
    pub attributes: Map<String, Value>,
    pub metrics: Map<String, Value>,
    pub links: Vec<SpanLink>,
    pub input: Option<Body>,
    pub output: Option<Body>,
    pub error: Option<Body>,
    /// The input and output as stored when packed (`crate::packed`): then their
    /// text columns are written null.
    pub packed: [Option<Vec<u8>>; 2],
}

#[derive(Debug)]
pub struct TraceWrite {
    pub state: TraceState,
    /// Root attributes to merge into the summary's.
    pub attributes: Map<String, Value>,
    /// Whether the trace was stored before this batch: only then can a root
    /// attribute have a value row of another type to delete.
    pub stored: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepDelta {
    pub traces: i64,
    pub errored: i64,
    pub running: i64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunDelta {
    pub traces: i64,
    pub errored: i64,
    /// Traces whose root failed (a part of `errored`).
    pub failed: i64,
    pub running: i64,
    pub unstepped: i64,
    /// What the run's rows weigh, as [`sizes`] counts it.
    pub bytes: i64,
}

/// Everything a batch changes, ready to be written.
#[derive(Debug, Default)]
pub struct Plan {
    pub spans: Vec<SpanWrite>,
    pub traces: Vec<TraceWrite>,
    /// Parents that arrived after some of their children: those children, listed at
    /// the top meanwhile, move under the parent now.
    pub adopt: Vec<Adoption>,
    pub steps: BTreeMap<i64, StepDelta>,
    pub run: RunDelta,
    pub warnings: Vec<Warning>,
}

/// A parent whose children arrived first. When it has a step, its descendants that
/// have none take it, as they would have had the parent come first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adoption {
    pub trace_id: String,
    pub parent: String,
    pub step: Option<i64>,
}

/// A batch's spans by `(trace id, span id)`, keyed by one byte string: the trace
/// id's length, then both ids. Lookups build it in a reused buffer, so finding a
/// span allocates nothing (an event looks up its span and parent several times).
struct SpanIndex {
    slots: HashMap<Vec<u8>, usize>,
    scratch: Vec<u8>,
}

impl SpanIndex {
    fn with_capacity(n: usize) -> Self {
        SpanIndex {
            slots: HashMap::with_capacity(n),
            scratch: Vec::new(),
        }
    }

    fn key(&mut self, trace_id: &str, span_id: &str) {
        self.scratch.clear();
        self.scratch
            .extend_from_slice(&trace_id.len().to_le_bytes());
        self.scratch.extend_from_slice(trace_id.as_bytes());
        self.scratch.extend_from_slice(span_id.as_bytes());
    }

    fn get(&mut self, trace_id: &str, span_id: &str) -> Option<usize> {
        self.key(trace_id, span_id);
        self.slots.get(self.scratch.as_slice()).copied()
    }

    fn insert(&mut self, trace_id: &str, span_id: &str, slot: usize) {
        self.key(trace_id, span_id);
        self.slots.insert(self.scratch.clone(), slot);
    }
}

struct Batch<'l, L: Loader> {
    loader: &'l mut L,
    now: i64,
    /// Every span the batch touches, in the order first touched (the plan's).
    spans: Vec<SpanWrite>,
    index: SpanIndex,
    traces: HashMap<String, Touched>,
    plan: Plan,
}

/// A trace the batch touches: its write, and its activity and weight before the
/// batch (none and 0 for a trace new to the store), from which `finish` counts the
/// run's changes.
struct Touched {
    write: TraceWrite,
    before: Option<Activity>,
    bytes_before: i64,
}

/// Applies `events` (already validated, with their indexes in the request) on top of
/// the stored state. Pure apart from the reads through `loader`.
pub async fn plan_batch<L: Loader>(
    loader: &mut L,
    events: Vec<(usize, SpanEvent)>,
    now: i64,
) -> Result<Plan, L::Error> {
    let mut trace_ids = Vec::new();
    let mut seen_traces = HashSet::new();
    for (_, event) in &events {
        if seen_traces.insert(event.trace_id()) {
            trace_ids.push(event.trace_id().to_string());
        }
    }
    let known = loader.load_traces(&trace_ids).await?;
    // Every stored span's trace has a summary row, written in the same transaction,
    // so only spans of known traces can exist: a batch of new traces probes nothing.
    let mut keys: Vec<(String, String)> = Vec::new();
    if !known.is_empty() {
        let known_ids: HashSet<&str> = known.iter().map(|t| t.trace_id.as_str()).collect();
        let mut seen = HashSet::new();
        for (_, event) in &events {
            let trace_id = event.trace_id();
            if !known_ids.contains(trace_id) {
                continue;
            }
            let parent = match event {
                SpanEvent::Open(open) => open.parent_span_id.as_deref(),
                SpanEvent::Close(_) => None,
            };
            for span_id in std::iter::once(event.span_id()).chain(parent) {
                if seen.insert((trace_id, span_id)) {
                    keys.push((trace_id.to_string(), span_id.to_string()));
                }
            }
        }
    }
    // Sized up front: a span's entry is large, and each doubling moved them all into
    // freshly zeroed memory (5 % of the server's CPU on SDK traffic, under perf).
    let capacity = events.len();
    let mut batch = Batch {
        now,
        spans: Vec::with_capacity(capacity),
        index: SpanIndex::with_capacity(capacity),
        traces: HashMap::with_capacity(trace_ids.len()),
        plan: Plan::default(),
        loader,
    };
    if !keys.is_empty() {
        for state in batch.loader.load_spans(&keys).await? {
            batch.insert(state);
        }
    }
    for state in known {
        let touched = Touched {
            before: Some(state.activity()),
            bytes_before: state.bytes,
            write: TraceWrite {
                state,
                attributes: Map::new(),
                stored: true,
            },
        };
        batch
            .traces
            .insert(touched.write.state.trace_id.clone(), touched);
    }
    for (index, event) in events {
        match event {
            SpanEvent::Open(open) => batch.open(index, open).await?,
            SpanEvent::Close(close) => batch.close(index, close).await?,
        }
    }
    Ok(batch.finish())
}

impl SpanWrite {
    fn new(state: SpanState) -> Self {
        SpanWrite {
            stored_attrs: state.attr_count,
            state,
            attributes: Map::new(),
            metrics: Map::new(),
            links: Vec::new(),
            input: None,
            output: None,
            error: None,
            packed: [None, None],
        }
    }
}

/// The summary of `trace_id`, made on first touch; its update time moves to `now`.
/// A function of the map, not of the batch, so a span can stay borrowed.
fn trace_entry<'t>(
    traces: &'t mut HashMap<String, Touched>,
    trace_id: &str,
    now: i64,
) -> &'t mut TraceWrite {
    if !traces.contains_key(trace_id) {
        let write = TraceWrite {
            state: TraceState::new(trace_id, now),
            attributes: Map::new(),
            stored: false,
        };
        let touched = Touched {
            write,
            before: None,
            bytes_before: 0,
        };
        traces.insert(trace_id.to_string(), touched);
    }
    let trace = &mut traces.get_mut(trace_id).expect("inserted above").write;
    trace.state.updated_us = trace.state.updated_us.max(now);
    trace
}

impl<L: Loader> Batch<'_, L> {
    fn insert(&mut self, state: SpanState) -> usize {
        let slot = self.spans.len();
        self.index.insert(&state.trace_id, &state.span_id, slot);
        self.spans.push(SpanWrite::new(state));
        slot
    }

    /// A second open (or close) of a span is ignored, with a warning that says so.
    fn ignore_repeat(&mut self, index: usize, span_id: &str, op: &str, done: &str) {
        let message = format!("span {span_id} was already {done}; this {op} was ignored");
        self.plan.warnings.push(Warning { index, message });
    }

    /// Where the span is in `spans`; a placeholder is made for one not seen yet.
    fn slot(&mut self, trace_id: &str, span_id: &str) -> usize {
        match self.index.get(trace_id, span_id) {
            Some(slot) => slot,
            None => {
                self.weigh(trace_id, sizes::span_row(trace_id, span_id));
                self.insert(SpanState::placeholder(trace_id, span_id))
            }
        }
    }

    /// Adds what a write stores to its trace's weight.
    fn weigh(&mut self, trace_id: &str, bytes: i64) {
        let trace = trace_entry(&mut self.traces, trace_id, self.now);
        trace.state.bytes = trace.state.bytes.saturating_add(bytes);
    }

    async fn open(&mut self, index: usize, open: OpenEvent) -> Result<(), L::Error> {
        let trace_id = open.trace_id.as_str();
        let parent = open
            .parent_span_id
            .as_deref()
            .map(|p| self.slot(trace_id, p));
        let parent_step = parent.and_then(|p| self.spans[p].state.step);
        let me = self.slot(trace_id, &open.span_id);
        if self.spans[me].state.has_open {
            self.ignore_repeat(index, &open.span_id, "open", "opened");
            return Ok(());
        }
        let is_root = open.parent_span_id.is_none();
        // A root's attributes are kept twice: coded on its span, named on its trace.
        let bytes = sizes::len(&open.name)
            + sizes::coded_map_bytes(&open.attributes)
            + if is_root {
                sizes::map_bytes(&open.attributes)
            } else {
                0
            }
            + open
                .input
                .as_ref()
                .map_or(0, |b| sizes::body_bytes(&b.json));
        self.weigh(trace_id, bytes);
        let s = &mut self.spans[me].state;
        let had_children = s.child_count > 0;
        s.has_open = true;
        s.parent_span_id = open.parent_span_id.clone();
        s.name = open.name;
        s.kind = Some(open.kind);
        s.start_us = Some(open.ts);
        s.step = open.step.or(parent_step);
        s.rank = open.rank;
        s.thread_id = open.thread_id;
        let (attributes, warning) = self
            .merge_attributes(me, open.attributes, index, is_root)
            .await?;
        let span = &mut self.spans[me];
        // The last input that arrived wins: one may also ride the close.
        if open.input.is_some() {
            span.input = open.input;
        }
        let (step, pending) = (
            span.state.step,
            span.state.error_count + i64::from(span.state.status == SpanStatus::Error),
        );
        self.plan.warnings.extend(warning);
        if had_children {
            self.plan.adopt.push(Adoption {
                trace_id: open.trace_id.clone(),
                parent: open.span_id.clone(),
                step,
            });
        }

        // Hang the span under its parent, and carry up the errors it already holds.
        let mut tree_parent = String::new();
        let mut ordinal = open.ordinal.unwrap_or(0);
        if let (Some(p), Some(parent_id)) = (parent, open.parent_span_id.as_deref()) {
            let parent = &mut self.spans[p].state;
            // Without the client's order, siblings take their order of arrival.
            ordinal = open.ordinal.unwrap_or(parent.child_count);
            parent.child_count = parent.child_count.saturating_add(1);
            if parent.has_open {
                tree_parent = parent_id.to_string();
            }
            if pending > 0 {
                self.propagate_errors(trace_id, parent_id, pending).await?;
            }
        }
        let state = &mut self.spans[me].state;
        state.tree_parent = Some(tree_parent);
        state.ordinal = ordinal;

        let trace = trace_entry(&mut self.traces, trace_id, self.now);
        let t = &mut trace.state;
        t.span_count += 1;
        t.kinds |= open.kind.bit();
        if open.kind == SpanKind::Iteration {
            t.iteration_count += 1;
        }
        if is_root {
            t.root_span_id = Some(open.span_id);
            t.name = state.name.clone();
            t.kind = state.kind;
            t.step = state.step;
            t.rank = state.rank;
            t.thread_id = state.thread_id.clone();
            t.start_us = state.start_us;
            if state.has_close {
                t.status = state.status;
                t.end_us = state.end_us;
                t.root_tokens = state.token_count;
            }
            lift_root_attributes(trace, attributes);
        } else if state.has_close {
            t.child_tokens = t
                .child_tokens
                .saturating_add(state.token_count.unwrap_or(0));
        }
        Ok(())
    }

    async fn close(&mut self, index: usize, close: CloseEvent) -> Result<(), L::Error> {
        let trace_id = close.trace_id.as_str();
        let me = self.slot(trace_id, &close.span_id);
        if self.spans[me].state.has_close {
            self.ignore_repeat(index, &close.span_id, "close", "closed");
            return Ok(());
        }
        // A span interrupted by its run's finish has no close yet: this one wins.
        let bodies = [&close.input, &close.output, &close.error];
        let bytes = bodies
            .into_iter()
            .flatten()
            .map(|b| sizes::body_bytes(&b.json))
            .sum::<i64>()
            + sizes::coded_map_bytes(&close.attributes)
            + sizes::map_bytes(&close.metrics)
            + 64 * i64::try_from(close.links.len()).unwrap_or(i64::MAX);
        self.weigh(trace_id, bytes);
        let s = &mut self.spans[me].state;
        let newly_failed = close.status == SpanStatus::Error && s.status != SpanStatus::Error;
        s.has_close = true;
        s.status = close.status;
        s.end_us = Some(close.ts);
        s.token_count = close.token_count;
        let is_root = s.is_root();
        let (attributes, warning) = self
            .merge_attributes(me, close.attributes, index, is_root)
            .await?;
        let span = &mut self.spans[me];
        span.metrics.extend(close.metrics);
        span.links.extend(close.links);
        if close.input.is_some() {
            span.input = close.input;
        }
        span.output = close.output;
        span.error = close.error;
        self.plan.warnings.extend(warning);

        let state = &self.spans[me].state;
        if newly_failed && state.has_open {
            if let Some(p) = state.parent_span_id.clone() {
                self.propagate_errors(trace_id, &p, 1).await?;
            }
        }
        let state = &self.spans[me].state;
        let trace = trace_entry(&mut self.traces, trace_id, self.now);
        if newly_failed {
            trace.state.error_count += 1;
        }
        if is_root {
            trace.state.status = state.status;
            trace.state.end_us = state.end_us;
            trace.state.root_tokens = state.token_count;
            lift_root_attributes(trace, attributes);
        } else if state.has_open {
            trace.state.child_tokens = trace
                .state
                .child_tokens
                .saturating_add(state.token_count.unwrap_or(0));
        }
        Ok(())
    }

    /// Adds `incoming` to the span's attributes, keeping the first 256 names in the
    /// order they were set; a name set again (on the close, say) counts once.
    /// With `lift` (a root's event) it also answers the attributes it kept, for the
    /// trace summary; other spans' events, nearly all of them, copy nothing.
    async fn merge_attributes(
        &mut self,
        slot: usize,
        incoming: Map<String, Value>,
        index: usize,
        lift: bool,
    ) -> Result<(Option<Map<String, Value>>, Option<Warning>), L::Error> {
        let span = &self.spans[slot];
        let fresh = |name: &String| !span.attributes.contains_key(name);
        let new_names = incoming.keys().filter(|n| fresh(n)).count() as i64;
        let mut known: Option<HashSet<String>> = None;
        if span.state.attr_count.saturating_add(new_names) > MAX_ATTRIBUTES as i64 {
            // Near the limit the count must be exact: names stored by earlier batches
            // may be among the incoming ones. Rare, so it may cost a read.
            let mut names: HashSet<String> = span.attributes.keys().cloned().collect();
            if span.stored_attrs > 0 {
                let (trace_id, span_id) = (span.state.trace_id.clone(), span.state.span_id.clone());
                let stored = self
                    .loader
                    .load_attribute_names(&trace_id, &span_id)
                    .await?;
                names.extend(stored);
            }
            known = Some(names);
        }
        let span = &mut self.spans[slot];
        let Some(mut names) = known else {
            span.state.attr_count += new_names;
            let lifted = lift.then(|| incoming.clone());
            if span.attributes.is_empty() {
                span.attributes = incoming;
            } else {
                span.attributes.extend(incoming);
            }
            return Ok((lifted, None));
        };
        let mut kept = Map::new();
        let mut dropped = 0usize;
        for (name, value) in incoming {
            if names.contains(&name) || names.len() < MAX_ATTRIBUTES {
                names.insert(name.clone());
                kept.insert(name, value);
            } else {
                dropped += 1;
            }
        }
        span.state.attr_count = names.len() as i64;
        let lifted = lift.then(|| kept.clone());
        span.attributes.extend(kept);
        let warning = (dropped > 0).then(|| Warning {
            index,
            message: format!("{dropped} attributes past the first {MAX_ATTRIBUTES} were dropped"),
        });
        Ok((lifted, warning))
    }

    /// Adds `n` to the error count of `span_id` and every ancestor known so far.
    async fn propagate_errors(
        &mut self,
        trace_id: &str,
        span_id: &str,
        n: i64,
    ) -> Result<(), L::Error> {
        let mut current = span_id.to_string();
        let mut visited = HashSet::new();
        while visited.insert(current.clone()) {
            let slot = match self.index.get(trace_id, &current) {
                Some(slot) => slot,
                None => {
                    let key = (trace_id.to_string(), current.clone());
                    let loaded = self.loader.load_spans(std::slice::from_ref(&key)).await?;
                    match loaded.into_iter().next() {
                        Some(state) => self.insert(state),
                        None => break,
                    }
                }
            };
            let span = &mut self.spans[slot].state;
            span.error_count += n;
            if !span.has_open {
                break; // its own open will carry the count further up
            }
            match &span.parent_span_id {
                Some(p) => current = p.clone(),
                None => break,
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Plan {
        // Large bodies go packed; their trace weighs the frame, not the text (the
        // text index still weighs the text).
        for span in &mut self.spans {
            let mut saved = 0;
            for (body, packed) in [&span.input, &span.output]
                .into_iter()
                .zip(&mut span.packed)
            {
                *packed = body.as_ref().and_then(|b| crate::packed::pack(&b.json));
                if let (Some(b), Some(frame)) = (body, packed.as_ref()) {
                    saved += sizes::len(&b.json) - sizes::len_bytes(frame);
                }
            }
            if saved > 0 {
                if let Some(t) = self.traces.get_mut(&span.state.trace_id) {
                    t.write.state.bytes = t.write.state.bytes.saturating_sub(saved);
                }
            }
        }
        self.plan.spans = self.spans;
        let mut traces = Vec::with_capacity(self.traces.len());
        for Touched {
            write,
            before,
            bytes_before,
        } in self.traces.into_values()
        {
            self.plan.run.bytes = self
                .plan
                .run
                .bytes
                .saturating_add(write.state.bytes - bytes_before);
            let after = write.state.activity();
            if before != Some(after) {
                if let Some(old) = before {
                    self.plan.count(old, -1);
                }
                self.plan.count(after, 1);
            }
            traces.push(write);
        }
        traces.sort_by(|a, b| a.state.trace_id.cmp(&b.state.trace_id));
        self.plan.traces = traces;
        self.plan
    }
}

impl Plan {
    /// Adds (`sign` 1) or takes away (-1) one trace's part in the run's counts and
    /// its step's activity.
    pub fn count(&mut self, activity: Activity, sign: i64) {
        let plan = self;
        let errored = sign * i64::from(activity.errored);
        let running = sign * i64::from(activity.running);
        plan.run.traces += sign;
        plan.run.errored += errored;
        plan.run.failed += sign * i64::from(activity.failed);
        plan.run.running += running;
        match activity.step {
            Some(step) => {
                let delta = plan.steps.entry(step).or_default();
                delta.traces += sign;
                delta.errored += errored;
                delta.running += running;
            }
            None => plan.run.unstepped += sign,
        }
    }
}

fn lift_root_attributes(trace: &mut TraceWrite, attributes: Option<Map<String, Value>>) {
    let Some(attributes) = attributes else {
        return;
    };
    if let Some(Value::String(id)) = attributes.get("rollout_id") {
        trace.state.rollout_id = Some(id.clone());
    }
    trace.attributes.extend(attributes);
}
