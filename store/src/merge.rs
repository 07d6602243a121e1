//! A group-commit transaction's batches, on either database: sorted (replays, unknown
//! runs) and folded into one batch per run. A run's events go through the ingest
//! rules once, in arrival order, which is what applying its batches one after
//! another does, but with one set of reads and statements. Each batch still gets its
//! own answer, with its own event indexes.

use std::collections::{HashMap, HashSet};

use tokio::sync::oneshot;
use treeline_wire::{BatchResponse, SpanEvent, Warning};

use super::dialect::Dialect;
use super::run_writes;
use super::{EventBatch, IdempotencyRecord, Receipt, StoreError, StoreResult, Written};

/// An event batch waiting for its group's transaction.
pub(super) struct BatchJob {
    pub run_id: String,
    pub batch: EventBatch,
    pub now: i64,
    pub reply: oneshot::Sender<StoreResult<Written>>,
}

/// A group's work: each job's run, batch and arrival time.
pub(super) type Work = Vec<(String, EventBatch, i64)>;

/// A group's jobs split into their replies and their work.
pub(super) fn split(jobs: Vec<BatchJob>) -> (Vec<oneshot::Sender<StoreResult<Written>>>, Work) {
    jobs.into_iter()
        .map(|job| (job.reply, (job.run_id, job.batch, job.now)))
        .unzip()
}

/// Sends each job its answer, or every job the group's failure (then none was
/// acknowledged). True when the group committed.
pub(super) fn answer_group(
    replies: Vec<oneshot::Sender<StoreResult<Written>>>,
    written: StoreResult<Vec<StoreResult<Written>>>,
) -> bool {
    match written {
        Ok(answers) => {
            for (reply, answer) in replies.into_iter().zip(answers) {
                let _ = reply.send(answer);
            }
            true
        }
        Err(e) => {
            tracing::error!(error = %crate::failure::chain(&e), batches = replies.len(),
                "a group write failed; none of its batches was kept");
            let shared = std::sync::Arc::new(e);
            for reply in replies {
                let _ = reply.send(Err(StoreError::GroupFailed(shared.clone())));
            }
            false
        }
    }
}

/// A group's jobs sorted before anything is written: each is answered already (a
/// key answered before replays that answer; an unknown run fails only its own
/// batch), waits for an earlier job's answer under the same key, or joins its run's
/// merged batch.
pub(super) struct Sorted {
    pub answers: Vec<Option<StoreResult<Written>>>,
    pub runs: Vec<RunBatch>,
    replays_of_taken: Vec<(usize, String)>,
    /// The answers under the group's keys: stored before, or given in this group.
    answered: HashMap<String, IdempotencyRecord>,
}

/// Sorts `work` (see [`Sorted`]), reading the stored answers of its keys. On
/// PostgreSQL, call it under the runs' locks, so a racing request with one of these
/// keys has committed.
pub(super) async fn sort<DB: Dialect>(
    conn: &mut DB::Connection,
    work: Work,
) -> StoreResult<Sorted> {
    let keys: Vec<&str> = work
        .iter()
        .filter_map(|(_, batch, _)| batch.receipt.as_ref().map(|r| r.key.as_str()))
        .collect();
    let answered = run_writes::idempotency_records::<DB>(conn, &keys).await?;
    let mut answers: Vec<Option<StoreResult<Written>>> = work.iter().map(|_| None).collect();
    let mut runs: Vec<RunBatch> = Vec::new();
    let mut taken: HashSet<String> = HashSet::new();
    let mut replays_of_taken = Vec::new();
    for (job, (run_id, batch, now)) in work.into_iter().enumerate() {
        let key = batch.receipt.as_ref().map(|r| r.key.clone());
        if let Some(key) = key.as_ref() {
            if let Some(record) = answered.get(key) {
                answers[job] = Some(Ok(Written::Replay(record.clone())));
                continue;
            }
            if taken.contains(key) {
                replays_of_taken.push((job, key.clone()));
                continue;
            }
        }
        let run = match runs.iter().position(|r| r.run_id == run_id) {
            Some(i) => i,
            None => match run_writes::run_project::<DB>(conn, &run_id).await {
                Ok(project) => {
                    runs.push(RunBatch::new(run_id, project));
                    runs.len() - 1
                }
                Err(e @ StoreError::RunNotFound(_)) => {
                    answers[job] = Some(Err(e));
                    continue;
                }
                Err(e) => return Err(e),
            },
        };
        taken.extend(key);
        runs[run].push(job, batch, now);
    }
    Ok(Sorted {
        answers,
        runs,
        replays_of_taken,
        answered,
    })
}

impl Sorted {
    /// Answers the members of `run`, written with `warnings`; their receipts' records
    /// go to `records`, to be stored.
    pub(super) fn answer_run(
        &mut self,
        run: &mut RunBatch,
        warnings: Vec<Warning>,
        records: &mut Vec<IdempotencyRecord>,
    ) -> StoreResult<()> {
        for a in run.answers(warnings) {
            if let Some(receipt) = a.receipt {
                let record = receipt.record(&run.run_id, &a.answer)?;
                self.answered.insert(record.key.clone(), record.clone());
                records.push(record);
            }
            self.answers[a.job] = Some(Ok(Written::Stored(a.answer)));
        }
        Ok(())
    }

    /// Every job's answer, once every run was answered.
    pub(super) fn finish(mut self) -> Vec<StoreResult<Written>> {
        for (job, key) in std::mem::take(&mut self.replays_of_taken) {
            self.answers[job] = self
                .answered
                .get(&key)
                .cloned()
                .map(|r| Ok(Written::Replay(r)));
        }
        self.answers
            .into_iter()
            .map(|a| a.unwrap_or(Err(StoreError::WriterStopped)))
            .collect()
    }
}

/// The batches of one run in a group, their events renumbered to follow each other.
pub(super) struct RunBatch {
    pub run_id: String,
    pub project: String,
    /// Events of every member, each index shifted past the earlier members'.
    pub events: Vec<(usize, SpanEvent)>,
    /// The latest arrival time among the members.
    pub now: i64,
    members: Vec<Member>,
    next: usize,
}

/// One batch's place in its run's merged batch.
struct Member {
    job: usize,
    offset: usize,
    parsed: BatchResponse,
    receipt: Option<Receipt>,
}

/// A member's own answer, and the receipt to keep it under.
pub(super) struct Answered {
    pub job: usize,
    pub receipt: Option<Receipt>,
    pub answer: BatchResponse,
}

impl RunBatch {
    pub(super) fn new(run_id: String, project: String) -> Self {
        RunBatch {
            run_id,
            project,
            events: Vec::new(),
            now: i64::MIN,
            members: Vec::new(),
            next: 0,
        }
    }

    /// Appends the batch that is job `job` of the group.
    pub(super) fn push(&mut self, job: usize, batch: EventBatch, now: i64) {
        let offset = self.next;
        self.next += batch.events.iter().map(|(i, _)| i + 1).max().unwrap_or(0);
        self.events
            .extend(batch.events.into_iter().map(|(i, e)| (i + offset, e)));
        self.members.push(Member {
            job,
            offset,
            parsed: batch.parsed,
            receipt: batch.receipt,
        });
        self.now = self.now.max(now);
    }

    /// Each member's answer, given the warnings that storing the merged events raised
    /// (indexed as in `events`). Takes the members: asked once.
    pub(super) fn answers(&mut self, warnings: Vec<Warning>) -> Vec<Answered> {
        let members = std::mem::take(&mut self.members);
        let mut own: Vec<Vec<Warning>> = members.iter().map(|_| Vec::new()).collect();
        for w in warnings {
            // The last member starting at or before the index holds it.
            let m = members
                .partition_point(|m| m.offset <= w.index)
                .saturating_sub(1);
            if let (Some(member), Some(list)) = (members.get(m), own.get_mut(m)) {
                list.push(Warning {
                    index: w.index - member.offset,
                    message: w.message,
                });
            }
        }
        members
            .into_iter()
            .zip(own)
            .map(|(m, warnings)| Answered {
                job: m.job,
                receipt: m.receipt,
                answer: m.parsed.with_warnings(warnings),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use treeline_wire::parse_event;

    fn batch(spans: &[&str]) -> EventBatch {
        let events: Vec<(usize, SpanEvent)> = spans
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let e = serde_json::json!({"op": "open", "trace_id": "t", "span_id": s,
                    "name": "n", "kind": "tool", "ts": 1});
                // Index 2i: every other item of the request was rejected.
                (2 * i, parse_event(&e).expect("valid").0)
            })
            .collect();
        EventBatch {
            parsed: BatchResponse {
                accepted: events.len(),
                ..Default::default()
            },
            events,
            receipt: None,
        }
    }

    #[test]
    fn warnings_go_back_to_their_batch_with_its_own_indexes() {
        let mut run = RunBatch::new("r".into(), "p".into());
        run.push(4, batch(&["a", "b"]), 10); // items 0..3 -> merged 0..3
        run.push(7, batch(&[]), 30); // no events: takes no indexes
        run.push(9, batch(&["c", "d", "e"]), 20); // items 0..5 -> merged 3..8
        let merged: Vec<usize> = run.events.iter().map(|(i, _)| *i).collect();
        assert_eq!(merged, vec![0, 2, 3, 5, 7]);
        assert_eq!(run.now, 30);
        let warn = |index| Warning {
            index,
            message: format!("w{index}"),
        };
        let answers = run.answers(vec![warn(2), warn(3), warn(7)]);
        let got: Vec<(usize, Vec<usize>)> = answers
            .iter()
            .map(|a| (a.job, a.answer.warnings.iter().map(|w| w.index).collect()))
            .collect();
        assert_eq!(got, vec![(4, vec![2]), (7, vec![]), (9, vec![0, 4])]);
        assert_eq!(answers[2].answer.warnings[1].message, "w7");
    }
}
