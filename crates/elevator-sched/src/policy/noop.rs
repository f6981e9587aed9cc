//! noop: first in, first out, with back merging.
//!
//! The legacy `noop` elevator (block/noop-iosched.c): one FIFO list per
//! device, dispatch from its head, no sorting and no deadlines. The elevator
//! core still back-merges a new request into a queued one that ends where it
//! starts; noop has no sort tree, so it does no front merges.
//!
//! Invariants: requests leave in insertion order (a merged request keeps the
//! survivor's place); the FIFO holds exactly the queued ids plus ids already
//! absorbed by merges, which dispatch skips.
//!
//! Starvation bound: none beyond FIFO order, so a request waits at most for
//! the requests queued before it: `max_queued × service`.

use crate::queue::MergeOutcome;
use crate::{Dispatch, MergeRule, Scheduler, SchedulerType, SortedQueue, Tunables};
use elevator_core::{Duration, Instant, QueueLimits, Request, RequestId};
use std::collections::VecDeque;

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
    fifo: VecDeque<RequestId>,
    queue: SortedQueue,
    rule: MergeRule,
}

impl Noop {
    pub fn new(limits: &QueueLimits) -> Self {
        Noop {
            fifo: VecDeque::new(),
            queue: SortedQueue::new(),
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
        if let MergeOutcome::None(request) = self.queue.merge(request, &self.rule) {
            self.fifo.push_back(request.id);
            self.queue.insert(request);
        }
    }

    fn dispatch(&mut self, _now: Instant) -> Dispatch {
        while let Some(id) = self.fifo.pop_front() {
            if let Some(request) = self.queue.remove(id) {
                return Dispatch::Request(request);
            }
        }
        Dispatch::Empty
    }

    fn complete(&mut self, _request: &Request, _now: Instant) {}

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn starvation_bound(&self, service: Duration, max_queued: usize) -> Option<Duration> {
        Some(service.mul(max_queued as u64 + 1))
    }
}
