//! cfq-2003: the first CFQ, per-process queues served from one list.
//!
//! Jens Axboe's original "complete fairness queueing" scheduler, the one
//! the 2003 benchmarks measured as "2.5.61+CFQ" (2.5.61-mm1). We read it in
//! three forms that share the algorithm line for line: the -mm version
//! Axboe reposted as "\[PATCH\] 2.6.0-test4 CFQ io scheduler" (LKML, 29 Aug
//! 2003, "the latest version from before -mm dropped it"), and
//! drivers/block/cfq-iosched.c of 2.6.0 with and without its tunables in
//! `cfq_data`. Algorithm only: the code is ours. Today's `cfq` (2.6.33-3.x,
//! time slices and idling) is a different scheduler that kept the name.
//!
//! # Entities
//! - A **queue** per process (`cfq_hash_key` is the thread group id; here
//!   the `TaskId`, which the host gives each process), holding its
//!   requests sorted by start sector (an rbtree in the kernel). A queue
//!   exists while it holds requests: the kernel frees it (`cfq_put_queue`)
//!   as its last request leaves.
//! - The **busy list** (`rr_list`) of the queues that hold requests. A
//!   queue that becomes busy is added at the *head* (`list_add`).
//! - The **dispatch list** (the request queue's `queue_head`): requests
//!   moved out of the queues, taken by the driver from its front.
//!
//! # Dispatch (`cfq_next_request`, `cfq_dispatch_requests`)
//! The driver takes the front of the dispatch list. Only when it is empty
//! are requests moved into it, in passes: a pass makes as many moves as
//! there were busy queues when it began, each move taking the
//! lowest-sector request of the queue at the head of the busy list
//! (`rb_first`). The kernel's loop walks the list with
//! `list_for_each_safe` but picks `rr_list.next` each time and never
//! rotates the list, so a pass takes its moves from the head queue until
//! that queue empties and leaves the list, then from the next. Passes
//! repeat while fewer than `quantum` requests were moved and some queue
//! kept requests. So a process that becomes busy is served first, and a
//! process whose queue never runs dry (a writer with many requests
//! queued) keeps the head and starves the rest: the "round robin" the
//! header comment promises came in later versions (2.6.5's rewrite picks
//! `list_entry_cfqq(entry)`).
//!
//! Each moved request is placed in the dispatch list by
//! `cfq_dispatch_sort`, followed as written: it goes last if its sector
//! is above the last request's, else just before the last request (the
//! walk back from the tail stops at the first request not below it, and
//! an ascending list's last request is one). Requests moved from one queue
//! come in ascending order and so keep it.
//!
//! # Merging
//! A request back-merges into a queued one that ends where it starts, and
//! front-merges into one of its own process's queue that starts where it
//! ends. Departure: the kernel's back-merge hash is global, so a request
//! could join another process's queued request; here requests merge
//! within their own process's queue only. A request whose start sector
//! equals one already queued by its process (an rbtree alias) sends the
//! queued one straight to the dispatch list, as `cfq_add_crq_rb` does.
//! Requests in the dispatch list no longer merge (`cfq_remove_merge_hints`).
//!
//! Not modelled here: `cfq_may_queue`'s per-process request limit
//! (`cfq_queued` = 8, with `nr_requests` raised to 8192) belongs to the
//! block layer's request allocation, which the engine does, not the
//! policy.
//!
//! Invariants: `busy` holds each task with a queue exactly once, and every
//! queue in `queues` is non-empty; `queued` counts the requests in the
//! queues and the dispatch list.
//!
//! Starvation bound: none. A queue at the head that keeps getting requests
//! is served alone for as long as it does, and within a queue the lowest
//! sector always goes first.

use crate::queue::SortedQueue;
use crate::{Dispatch, MergeOutcome, MergeRule, Scheduler, SchedulerType, Tunable, Tunables};
use elevator_core::{Duration, Instant, QueueLimits, Request, TaskId};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// At least 4 requests are moved to the dispatch list per refill
/// (`cfq_quantum`, drivers/block/cfq-iosched.c of 2.6.0 and the 2003 -mm
/// patch).
pub const QUANTUM: i64 = 4;

pub const TYPE: SchedulerType = SchedulerType {
    name: "cfq-2003",
    aliases: &["cfq-2.5.61"],
    about: "the first CFQ (2.5.61-mm1, 2.6.0): per-process queues, no slices, no idling",
    honours: &[],
    tunables: &[Tunable {
        name: "quantum",
        default: QUANTUM,
        unit: "requests",
        about: "fewest requests moved to the dispatch list per refill",
    }],
    build: |t, limits| Box::new(Cfq2003::from_tunables(t, limits)),
};

/// The 2003 CFQ policy.
#[derive(Debug)]
pub struct Cfq2003 {
    quantum: usize,
    rule: MergeRule,
    /// Per-process sorted queues; a queue is here only while non-empty.
    queues: FxHashMap<TaskId, SortedQueue>,
    /// The busy list, head first.
    busy: VecDeque<TaskId>,
    /// Requests moved out of the queues, front first.
    dispatch: VecDeque<Request>,
    queued: usize,
}

impl Cfq2003 {
    pub fn from_tunables(t: &Tunables, limits: &QueueLimits) -> Self {
        Cfq2003 {
            // A quantum of 0 would still move one pass; keep it at least 1.
            quantum: t.get("quantum").max(1) as usize,
            rule: MergeRule {
                max_sectors: limits.max_sectors,
                front_merges: true,
                same_task: true,
            },
            queues: FxHashMap::default(),
            busy: VecDeque::new(),
            dispatch: VecDeque::new(),
            queued: 0,
        }
    }

    /// With the 2.6.0 defaults.
    pub fn new(limits: &QueueLimits) -> Self {
        let t = TYPE.tunables(std::iter::empty()).expect("defaults");
        Cfq2003::from_tunables(&t, limits)
    }

    /// The busy list, head first (for tests and traces).
    pub fn busy_list(&self) -> Vec<TaskId> {
        self.busy.iter().copied().collect()
    }

    /// Requests waiting in the dispatch list.
    pub fn dispatch_len(&self) -> usize {
        self.dispatch.len()
    }

    /// `cfq_dispatch_sort` as written: last if above the last request's
    /// sector, else just before the last request.
    fn dispatch_sort(&mut self, request: Request) {
        match self.dispatch.back() {
            Some(last) if request.sector <= last.sector => {
                let at = self.dispatch.len() - 1;
                self.dispatch.insert(at, request);
            }
            _ => self.dispatch.push_back(request),
        }
    }

    /// `cfq_dispatch_requests`: move passes of requests from the head of
    /// the busy list until at least `quantum` moved or the queues are dry.
    fn refill(&mut self) {
        let mut moved = 0;
        loop {
            let moves = self.busy.len();
            let mut kept_requests = 0;
            for _ in 0..moves {
                // A pass cannot run dry: each of its `moves` queues held a
                // request when it began.
                let Some(&task) = self.busy.front() else {
                    break;
                };
                let q = self.queues.get_mut(&task).expect("busy queues exist");
                let first = q.first().expect("busy queues are not empty");
                let request = q.remove(first).expect("queued");
                if q.is_empty() {
                    self.queues.remove(&task);
                    self.busy.pop_front();
                } else {
                    kept_requests += 1;
                }
                self.dispatch_sort(request);
                moved += 1;
            }
            if moved >= self.quantum || kept_requests == 0 {
                break;
            }
        }
    }
}

impl Scheduler for Cfq2003 {
    fn name(&self) -> &'static str {
        "cfq-2003"
    }

    fn insert(&mut self, request: Request, _now: Instant) {
        let task = request.task;
        let rule = self.rule;
        let was_busy = self.queues.contains_key(&task);
        let q = self.queues.entry(task).or_default();
        let request = match q.merge(request, &rule) {
            MergeOutcome::Merged {
                absorbed_queued, ..
            } => {
                if absorbed_queued.is_some() {
                    self.queued -= 1;
                }
                return;
            }
            MergeOutcome::None(request) => request,
        };
        // An rbtree alias: the queued request at the same sector goes to
        // the dispatch list, and the new one takes its key.
        let alias = q
            .first_at_or_after(request.sector)
            .filter(|&id| q.get(id).is_some_and(|r| r.sector == request.sector));
        let alias = alias.map(|id| q.remove(id).expect("queued"));
        q.insert(request);
        if !was_busy {
            self.busy.push_front(task);
        }
        self.queued += 1;
        if let Some(old) = alias {
            self.dispatch_sort(old);
        }
    }

    fn dispatch(&mut self, _now: Instant) -> Dispatch {
        if self.dispatch.is_empty() {
            self.refill();
        }
        match self.dispatch.pop_front() {
            Some(request) => {
                self.queued -= 1;
                Dispatch::Request(request)
            }
            None => Dispatch::Empty,
        }
    }

    fn complete(&mut self, _request: &Request, _now: Instant) {}

    fn queued(&self) -> usize {
        self.queued
    }

    fn starvation_bound(&self, _service: Duration, _max_queued: usize) -> Option<Duration> {
        None
    }

    fn check_invariants(&self) -> Result<(), String> {
        if self.busy.len() != self.queues.len() {
            return Err(format!(
                "{} queues but {} on the busy list",
                self.queues.len(),
                self.busy.len()
            ));
        }
        let mut seen = rustc_hash::FxHashSet::default();
        let mut in_queues = 0;
        for task in &self.busy {
            if !seen.insert(*task) {
                return Err(format!("{task:?} is on the busy list twice"));
            }
            let Some(q) = self.queues.get(task) else {
                return Err(format!("{task:?} is busy but has no queue"));
            };
            if q.is_empty() {
                return Err(format!("{task:?} is busy with an empty queue"));
            }
            if let Some(r) = q.iter().find(|r| r.task != *task) {
                return Err(format!("{:?} of {:?} is in {task:?}'s queue", r.id, r.task));
            }
            in_queues += q.len();
        }
        if in_queues + self.dispatch.len() != self.queued {
            return Err(format!(
                "{} queued, but {in_queues} in queues and {} in the dispatch list",
                self.queued,
                self.dispatch.len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(r: &Request) -> Vec<u64> {
        let mut v: Vec<u64> = r.ids().map(|id| id.0).collect();
        v.sort();
        v
    }

    fn next(s: &mut Cfq2003) -> Vec<u64> {
        assert_eq!(s.check_invariants(), Ok(()));
        match s.dispatch(Instant::ZERO) {
            Dispatch::Request(r) => ids(&r),
            other => panic!("expected a request, got {other:?}"),
        }
    }

    #[test]
    fn a_refill_moves_a_quantum_from_a_lone_queue_lowest_sector_first() {
        let mut s = Cfq2003::new(&QueueLimits::default());
        for (id, sector) in [
            (1, 5000),
            (2, 1000),
            (3, 3000),
            (4, 2000),
            (5, 4000),
            (6, 0),
        ] {
            s.insert(Request::read(id, 1, sector, 8), Instant::ZERO);
        }
        assert_eq!(next(&mut s), vec![6]);
        // One busy queue: four passes of one move each, a quantum of 4.
        assert_eq!(s.dispatch_len(), 3);
        assert_eq!(s.queued(), 5);
        assert_eq!(
            [next(&mut s), next(&mut s), next(&mut s)],
            [vec![2], vec![4], vec![3]]
        );
        assert_eq!(s.dispatch_len(), 0);
        assert_eq!([next(&mut s), next(&mut s)], [vec![5], vec![1]]);
        assert_eq!(s.dispatch(Instant::ZERO), Dispatch::Empty);
        assert!(s.busy_list().is_empty());
    }

    #[test]
    fn the_head_queue_is_served_until_it_runs_dry() {
        // Task 1 became busy first, task 2 after it: 2 is at the head.
        let mut s = Cfq2003::new(&QueueLimits::default());
        for i in 0..6 {
            s.insert(
                Request::read(10 + i, 1, 1_000_000 + 100 * i, 8),
                Instant::ZERO,
            );
        }
        for i in 0..6 {
            s.insert(Request::read(20 + i, 2, 100 * i, 8), Instant::ZERO);
        }
        assert_eq!(s.busy_list(), vec![TaskId(2), TaskId(1)]);
        // Two busy queues: a pass is two moves, both from the head (2);
        // two passes make the quantum.
        let first: Vec<Vec<u64>> = (0..4).map(|_| next(&mut s)).collect();
        assert_eq!(first, vec![vec![20], vec![21], vec![22], vec![23]]);
        // Next refill: a pass of two moves takes 24 and 25 (2 empties and
        // leaves the list), then passes of one move take 10 and 11.
        let second: Vec<Vec<u64>> = (0..4).map(|_| next(&mut s)).collect();
        assert_eq!(second, vec![vec![24], vec![25], vec![10], vec![11]]);
        assert_eq!(s.busy_list(), vec![TaskId(1)]);
    }

    #[test]
    fn a_queue_that_becomes_busy_goes_to_the_head() {
        let mut s = Cfq2003::new(&QueueLimits::default());
        for i in 0..8 {
            s.insert(Request::read(10 + i, 1, 100 * i, 8), Instant::ZERO);
        }
        assert_eq!(next(&mut s), vec![10]);
        // A second process arrives while 1 is busy: it is served next.
        s.insert(Request::read(30, 3, 9_000_000, 8), Instant::ZERO);
        assert_eq!(s.busy_list(), vec![TaskId(3), TaskId(1)]);
        let order: Vec<Vec<u64>> = (0..3).map(|_| next(&mut s)).collect();
        assert_eq!(order, vec![vec![11], vec![12], vec![13]]);
        // The next refill: a pass of two moves takes 30 (3 empties) and
        // 14, then passes of one move take 15 and 16. Each is below 30, so
        // each goes just before it in the dispatch list.
        let order: Vec<Vec<u64>> = (0..4).map(|_| next(&mut s)).collect();
        assert_eq!(order, vec![vec![14], vec![15], vec![16], vec![30]]);
    }

    #[test]
    fn a_queue_that_never_drains_starves_the_queues_behind_it() {
        // Task 1 (pdflush, say) has requests queued; task 2 (a writer
        // writing back its own pages) becomes busy after it and goes to the
        // head. As long as 2 keeps requests queued, 1 is never served.
        let mut s = Cfq2003::new(&QueueLimits::default());
        s.insert(Request::write(1, 1, 1_000_000, 8), Instant::ZERO);
        s.insert(Request::write(2, 1, 2_000_000, 8), Instant::ZERO);
        let mut id = 100;
        // Not contiguous, so they do not merge: eight queued to start.
        for _ in 0..8 {
            id += 1;
            s.insert(Request::write(id, 2, 16 * id, 8), Instant::ZERO);
        }
        assert_eq!(s.busy_list(), vec![TaskId(2), TaskId(1)]);
        for _ in 0..1000 {
            id += 1;
            s.insert(Request::write(id, 2, 16 * id, 8), Instant::ZERO);
            match s.dispatch(Instant::ZERO) {
                Dispatch::Request(r) => assert_eq!(r.task, TaskId(2), "task 1 starves"),
                other => panic!("{other:?}"),
            }
        }
        // Once task 2 stops, its queue drains and task 1 is served.
        let mut rest: Vec<u32> = Vec::new();
        while let Dispatch::Request(r) = s.dispatch(Instant::ZERO) {
            rest.push(r.task.0);
        }
        assert_eq!(rest.iter().filter(|&&t| t == 1).count(), 2);
        assert_eq!(rest.last(), Some(&1));
    }

    #[test]
    fn check_invariants_sees_a_broken_busy_list_and_count() {
        let mut s = Cfq2003::new(&QueueLimits::default());
        s.insert(Request::read(1, 1, 100, 8), Instant::ZERO);
        s.insert(Request::read(2, 2, 900, 8), Instant::ZERO);
        assert_eq!(s.check_invariants(), Ok(()));
        s.busy.push_back(TaskId(1));
        assert!(s.check_invariants().is_err());
        s.busy.pop_back();
        s.queued += 1;
        assert!(s.check_invariants().is_err());
        s.queued -= 1;
        assert_eq!(s.check_invariants(), Ok(()));
    }

    #[test]
    fn dispatch_sort_puts_a_lower_request_before_the_last() {
        let mut s = Cfq2003::new(&QueueLimits::default());
        s.dispatch_sort(Request::read(1, 1, 100, 8));
        s.dispatch_sort(Request::read(2, 1, 300, 8));
        s.dispatch_sort(Request::read(3, 2, 200, 8));
        s.dispatch_sort(Request::read(4, 2, 50, 8));
        s.dispatch_sort(Request::read(5, 2, 400, 8));
        let order: Vec<u64> = s.dispatch.iter().map(|r| r.id.0).collect();
        assert_eq!(order, vec![1, 3, 4, 2, 5]);
    }

    #[test]
    fn requests_merge_within_their_process_only() {
        let mut s = Cfq2003::new(&QueueLimits::default());
        s.insert(Request::read(1, 1, 100, 8), Instant::ZERO);
        s.insert(Request::read(2, 1, 108, 8), Instant::ZERO); // back merge
        s.insert(Request::read(3, 1, 92, 8), Instant::ZERO); // front merge
        s.insert(Request::read(4, 2, 116, 8), Instant::ZERO); // other process
        assert_eq!(s.queued(), 2);
        let mut got = vec![next(&mut s), next(&mut s)];
        got.sort();
        assert_eq!(got, vec![vec![1, 2, 3], vec![4]]);
    }

    #[test]
    fn an_alias_sends_the_queued_request_to_the_dispatch_list() {
        let mut s = Cfq2003::new(&QueueLimits::default());
        s.insert(Request::read(1, 1, 500, 8), Instant::ZERO);
        s.insert(Request::read(2, 1, 100, 8), Instant::ZERO);
        // Same start sector as 1 but a different size: no merge, an alias.
        s.insert(Request::read(3, 1, 500, 16), Instant::ZERO);
        assert_eq!(s.queued(), 3);
        assert_eq!(s.dispatch_len(), 1);
        assert_eq!(next(&mut s), vec![1]);
        assert_eq!([next(&mut s), next(&mut s)], [vec![2], vec![3]]);
    }
}
