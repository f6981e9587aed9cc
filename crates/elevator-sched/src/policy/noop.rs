//! noop: first in, first out, with back merging.
//!
//! The legacy `noop` elevator (block/noop-iosched.c): one FIFO list per
//! device, dispatch from its head, no sorting and no deadlines. The elevator
//! core still back-merges a new request into a queued one that ends where it
//! starts; noop has no sort tree, so it does no front merges.
//!
//! Invariants: requests leave in insertion order. A merged request leaves at
//! the earliest FIFO place of the requests in it: when a back merge closes
//! a gap and the survivor swallows a queued neighbour that was inserted
//! before it, the merged request takes the neighbour's place (see
//! [`FifoQueue`]). The legacy kernel noop keeps the survivor's own place,
//! so an old request swallowed by a newer one rides to the back of the
//! queue and can wait behind every request inserted after it; the kernel's
//! deadline moves the survivor to the earlier FIFO place, and so do we here.
//!
//! Starvation bound: FIFO order, so a request waits at most for the request
//! in service and those queued before it: `(max_queued + 1) × service`.

use crate::queue::FifoQueue;
use crate::{Dispatch, MergeRule, Scheduler, SchedulerType, Tunables};
use elevator_core::{Duration, Instant, QueueLimits, Request};

pub const TYPE: SchedulerType = SchedulerType {
    name: "noop",
    aliases: &["none"],
    about: "FIFO with back merging (Linux noop / blk-mq none)",
    honours: &[],
    tunables: &[],
    build: |_, limits| Box::new(Noop::new(limits)),
};

/// The noop policy.
#[derive(Debug)]
pub struct Noop {
    queue: FifoQueue,
    rule: MergeRule,
}

impl Noop {
    pub fn new(limits: &QueueLimits) -> Self {
        Noop {
            queue: FifoQueue::new(),
            rule: MergeRule {
                max_sectors: limits.max_sectors,
                front_merges: false,
                same_task: false,
            },
        }
    }

    /// Build from resolved tunables (noop has none).
    pub fn from_tunables(_: &Tunables, limits: &QueueLimits) -> Self {
        Noop::new(limits)
    }
}

impl Scheduler for Noop {
    fn name(&self) -> &'static str {
        "noop"
    }

    fn insert(&mut self, request: Request, _now: Instant) {
        self.queue.insert(request, &self.rule);
    }

    fn dispatch(&mut self, _now: Instant) -> Dispatch {
        match self.queue.pop_front() {
            Some(request) => Dispatch::Request(request),
            None => Dispatch::Empty,
        }
    }

    fn complete(&mut self, _request: &Request, _now: Instant) {}

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.queue.check()
    }

    fn starvation_bound(&self, service: Duration, max_queued: usize) -> Option<Duration> {
        Some(service.mul(max_queued as u64 + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(s: &mut Noop) -> Vec<Vec<u64>> {
        let mut out = Vec::new();
        while let Dispatch::Request(r) = s.dispatch(Instant::ZERO) {
            let mut ids: Vec<u64> = r.ids().map(|id| id.0).collect();
            ids.sort();
            out.push(ids);
        }
        out
    }

    #[test]
    fn first_in_first_out_with_back_merges() {
        let mut s = Noop::new(&QueueLimits::default());
        s.insert(Request::read(1, 1, 500, 8), Instant::ZERO);
        s.insert(Request::read(2, 2, 100, 8), Instant::ZERO);
        s.insert(Request::read(3, 1, 508, 8), Instant::ZERO);
        // No front merges: 4 ends where 2 starts but stays on its own.
        s.insert(Request::read(4, 2, 92, 8), Instant::ZERO);
        assert_eq!(s.queued(), 3);
        assert_eq!(drain(&mut s), vec![vec![1, 3], vec![2], vec![4]]);
        assert_eq!(s.dispatch(Instant::ZERO), Dispatch::Empty);
    }

    #[test]
    fn a_swallowed_older_request_keeps_its_place() {
        let mut s = Noop::new(&QueueLimits::default());
        s.insert(Request::read(1, 1, 100, 8), Instant::ZERO);
        s.insert(Request::read(2, 2, 5000, 8), Instant::ZERO);
        s.insert(Request::read(3, 1, 84, 8), Instant::ZERO);
        // Fills [92, 100): back merge into 3, then 3 swallows 1, which was
        // inserted before 2, so the merged request goes before 2.
        s.insert(Request::read(4, 1, 92, 8), Instant::ZERO);
        assert_eq!(drain(&mut s), vec![vec![1, 3, 4], vec![2]]);
    }

    #[test]
    fn a_swallowed_newer_request_moves_up() {
        let mut s = Noop::new(&QueueLimits::default());
        s.insert(Request::read(1, 1, 84, 8), Instant::ZERO);
        s.insert(Request::read(2, 2, 5000, 8), Instant::ZERO);
        s.insert(Request::read(3, 1, 100, 8), Instant::ZERO);
        s.insert(Request::read(4, 1, 92, 8), Instant::ZERO);
        assert_eq!(drain(&mut s), vec![vec![1, 3, 4], vec![2]]);
    }
}
