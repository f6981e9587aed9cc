//! What every model shares: the host-side view of requests in flight.
//!
//! A model decides *when* each submitted request finishes; this queue hands
//! them back in time order, counts what is in flight and keeps the
//! host-visible counters (busy time, requests). Its heap is sized once for
//! the queue depth, so pushing never allocates on the hot path.

use crate::DeviceStats;
use elevator_core::{Instant, RequestId};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Completions ordered by due time, then by submission order.
#[derive(Debug)]
pub(crate) struct Completions {
    /// (due, submission sequence, id): the sequence breaks ties so equal
    /// due times come back in the order they were scheduled.
    heap: BinaryHeap<Reverse<(Instant, u64, RequestId)>>,
    seq: u64,
    in_flight: usize,
    /// When `in_flight` last went from 0 to 1.
    busy_since: Instant,
    pub(crate) stats: DeviceStats,
}

impl Completions {
    pub(crate) fn new(queue_depth: u32) -> Self {
        Completions {
            heap: BinaryHeap::with_capacity(queue_depth as usize + 1),
            seq: 0,
            in_flight: 0,
            busy_since: Instant::ZERO,
            stats: DeviceStats::default(),
        }
    }

    /// A request was accepted from the host at `now`.
    pub(crate) fn submitted(&mut self, now: Instant) {
        if self.in_flight == 0 {
            self.busy_since = now;
        }
        self.in_flight += 1;
    }

    /// The model has decided that `id` finishes at `due`.
    pub(crate) fn schedule(&mut self, id: RequestId, due: Instant) {
        debug_assert!(
            self.heap.len() < self.in_flight,
            "more completions than requests"
        );
        self.heap.push(Reverse((due, self.seq, id)));
        self.seq += 1;
    }

    /// The earliest scheduled completion.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((due, _, _))| *due)
    }

    /// Pop one completion due at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<RequestId> {
        match self.heap.peek() {
            Some(Reverse((due, _, _))) if *due <= now => {}
            _ => return None,
        }
        let Reverse((due, _, id)) = self.heap.pop()?;
        debug_assert!(self.in_flight > 0);
        self.in_flight -= 1;
        self.stats.requests += 1;
        // Count busy time as it passes, so a device that never drains (a
        // full NCQ queue) still reports it.
        self.stats.busy_ns += due.since(self.busy_since).nanos();
        self.busy_since = due;
        Some(id)
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_due_order_and_counts_busy_time() {
        let mut c = Completions::new(4);
        c.submitted(Instant(10));
        c.submitted(Instant(10));
        c.schedule(RequestId(1), Instant(50));
        c.schedule(RequestId(2), Instant(30));
        assert_eq!(c.next_due(), Some(Instant(30)));
        assert_eq!(c.pop_due(Instant(29)), None);
        assert_eq!(c.pop_due(Instant(60)), Some(RequestId(2)));
        assert_eq!(c.pop_due(Instant(60)), Some(RequestId(1)));
        assert_eq!(c.in_flight(), 0);
        assert_eq!(c.stats.busy_ns, 40);
        assert_eq!(c.stats.requests, 2);
    }
}
