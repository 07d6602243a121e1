//! Group commit: requests that arrive while a transaction is being written wait,
//! and the next one to get the gate writes all of them in a single transaction.
//! With one writer, an ingest request otherwise spends most of its time handing
//! the connection back and forth; sharing the transaction shares that cost and
//! the commit's fsync.

use std::future::Future;
use std::sync::Mutex;

use tokio::sync::oneshot;

/// A queue of jobs and the gate one group passes at a time. A job carries its own
/// way to answer (a oneshot sender, say); the group's writer answers every job.
pub(super) struct GroupCommit<J> {
    queue: Mutex<Queue<J>>,
    gate: tokio::sync::Mutex<()>,
    /// Most weight one group takes (events, say), so one transaction stays bounded.
    max_weight: usize,
    /// Most weight waiting at once: past it a job is refused, not queued, so a
    /// flood of requests costs a 503 each instead of the server's memory.
    max_queued: usize,
}

struct Queue<J> {
    jobs: Vec<J>,
    weight: usize,
}

/// Why `submit` has no answer for a job.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// The queue held `max_queued` already; the job was not queued.
    Full,
    /// The group that took the job ended without answering it.
    Unanswered,
}

impl<J: Send + 'static> GroupCommit<J> {
    pub(super) fn new(max_weight: usize, max_queued: usize) -> Self {
        GroupCommit {
            queue: Mutex::new(Queue {
                jobs: Vec::new(),
                weight: 0,
            }),
            gate: tokio::sync::Mutex::new(()),
            max_weight,
            max_queued,
        }
    }

    /// Queues `job` and returns its answer: written by whichever group takes it.
    /// Until then the caller waits for the gate, and when it gets it, writes what is
    /// queued (its own job, unless an earlier group took it).
    pub(super) async fn submit<R, W, F, Fut>(
        &self,
        job: J,
        mut answer: oneshot::Receiver<R>,
        weight: W,
        write: F,
    ) -> Result<R, Refused>
    where
        W: Fn(&J) -> usize,
        F: FnOnce(Vec<J>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        {
            let mut queue = self.lock_queue();
            let w = weight(&job);
            // An empty queue takes any one job, however heavy.
            if !queue.jobs.is_empty() && queue.weight.saturating_add(w) > self.max_queued {
                return Err(Refused::Full);
            }
            queue.weight = queue.weight.saturating_add(w);
            queue.jobs.push(job);
        }
        let answered = tokio::select! {
            // A job another group took is answered without queueing for the gate.
            answered = &mut answer => answered,
            turn = self.gate.lock() => {
                let group = self.take(weight);
                if !group.is_empty() {
                    // Spawned, so a caller that goes away mid-write leaves the group
                    // whole; it still answers every job it took.
                    if let Err(e) = tokio::spawn(write(group)).await {
                        // Its jobs are answered `Unanswered`; the cause is here.
                        tracing::error!(error = %e, "a group writer panicked");
                    }
                }
                drop(turn);
                answer.await
            }
        };
        answered.map_err(|_| Refused::Unanswered)
    }

    /// The oldest jobs up to `max_weight` (at least one).
    fn take<W: Fn(&J) -> usize>(&self, weight: W) -> Vec<J> {
        let mut queue = self.lock_queue();
        let mut total: usize = 0;
        let mut n = 0;
        for job in queue.jobs.iter() {
            let next = total.saturating_add(weight(job));
            if n > 0 && next > self.max_weight {
                break;
            }
            total = next;
            n += 1;
        }
        queue.weight = queue.weight.saturating_sub(total);
        queue.jobs.drain(..n).collect()
    }

    fn lock_queue(&self) -> std::sync::MutexGuard<'_, Queue<J>> {
        // A panic while holding this lock can only come from Vec itself; the queue
        // is still a valid list.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    type Job = (usize, oneshot::Sender<usize>);

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_job_is_answered_and_groups_respect_the_weight_cap() {
        let group = Arc::new(GroupCommit::<Job>::new(10, 1_000));
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for i in 0..200 {
            let (group, sizes) = (group.clone(), sizes.clone());
            waiting.push(tokio::spawn(async move {
                let (tx, rx) = oneshot::channel();
                let write = move |jobs: Vec<Job>| async move {
                    sizes.lock().unwrap().push(jobs.len());
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    for (i, reply) in jobs {
                        let _ = reply.send(i * 2);
                    }
                };
                group.submit((i, tx), rx, |_| 3, write).await.unwrap()
            }));
        }
        for (i, w) in waiting.into_iter().enumerate() {
            assert_eq!(w.await.unwrap(), i * 2);
        }
        let sizes = sizes.lock().unwrap();
        assert_eq!(sizes.iter().sum::<usize>(), 200);
        // Weight 3 each under a cap of 10: at most 3 jobs per group, and with 200
        // callers racing, some groups do hold more than one.
        assert!(sizes.iter().all(|&n| (1..=3).contains(&n)), "{sizes:?}");
        assert!(sizes.iter().any(|&n| n > 1), "{sizes:?}");
    }

    /// A caller whose job an earlier group wrote returns with its answer, without
    /// waiting for the gate that the group's writer still holds.
    #[tokio::test]
    async fn an_answered_job_does_not_wait_for_the_gate() {
        let group = Arc::new(GroupCommit::<Job>::new(100, 1_000));
        let (hold_first, first_held) = oneshot::channel::<()>();
        let (_hold_second, second_held) = oneshot::channel::<()>();
        let submit = |i: usize, held: Option<oneshot::Receiver<()>>| {
            let group = group.clone();
            tokio::spawn(async move {
                let (tx, rx) = oneshot::channel();
                // Job 0's writer waits before answering, job 1's after (still
                // holding the gate).
                let (before, after) = if i == 0 { (held, None) } else { (None, held) };
                let write = move |jobs: Vec<Job>| async move {
                    wait_for(before).await;
                    for (i, reply) in jobs {
                        let _ = reply.send(i);
                    }
                    wait_for(after).await;
                };
                group.submit((i, tx), rx, |_| 1, write).await
            })
        };
        let a = submit(0, Some(first_held));
        tokio::task::yield_now().await;
        let b = submit(1, Some(second_held));
        let c = submit(2, None);
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        let _ = hold_first.send(());
        assert_eq!(a.await.unwrap().unwrap(), 0);
        // b leads the second group (b and c) and never lets go of the gate.
        let c = tokio::time::timeout(std::time::Duration::from_secs(5), c).await;
        assert_eq!(c.expect("c was answered").unwrap().unwrap(), 2);
        b.abort();
    }

    /// Past `max_queued`, a job is refused at once and nothing of it is queued;
    /// once the queue drains, jobs are taken again.
    #[tokio::test]
    async fn a_full_queue_refuses_new_jobs_at_once() {
        let group = Arc::new(GroupCommit::<Job>::new(100, 5));
        let (release, held) = oneshot::channel::<()>();
        let submit = |i: usize, held: Option<oneshot::Receiver<()>>| {
            let group = group.clone();
            tokio::spawn(async move {
                let (tx, rx) = oneshot::channel();
                let write = move |jobs: Vec<Job>| async move {
                    wait_for(held).await;
                    for (i, reply) in jobs {
                        let _ = reply.send(i);
                    }
                };
                group.submit((i, tx), rx, |_| 3, write).await
            })
        };
        // a holds the gate in its write; b waits in the queue (weight 3 of 5).
        let a = submit(0, Some(held));
        tokio::task::yield_now().await;
        let b = submit(1, None);
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        let refused = submit(2, None).await.unwrap();
        assert_eq!(refused, Err(Refused::Full));
        let _ = release.send(());
        assert_eq!(a.await.unwrap(), Ok(0));
        assert_eq!(b.await.unwrap(), Ok(1));
        assert_eq!(submit(3, None).await.unwrap(), Ok(3));
    }

    async fn wait_for(held: Option<oneshot::Receiver<()>>) {
        if let Some(held) = held {
            let _ = held.await;
        }
    }
}
