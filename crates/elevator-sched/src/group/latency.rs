//! io.latency: protect a group's completion latency by throttling the
//! queue depth of its looser siblings.
//!
//! After block/blk-iolatency.c (Linux 4.19+, Josef Bacik) and the cgroup v2
//! documentation (reference notes §7.4). A group with a target watches its
//! completions in windows of `clamp(16 × target, 100 ms, 1 s)`. A window
//! misses when the mean latency exceeds the target (rotational devices) or
//! when at least 10 % of the I/Os take the target or longer (flash). On a
//! miss, at most once per 500 ms, the parent scales its children down: the
//! siblings with a looser target or none may keep only half as many
//! requests allocated as before (the first step goes from unlimited to half
//! the queue depth; the floor is 1). Each good window of the protected
//! group (at least 5 samples) gives back `qd / 16`; back at `qd` the limit
//! is lifted. If the protected group does no I/O for a second, its
//! siblings are released at once.
//!
//! Simplifications, stated: the kernel's scale cookie is kept as one depth
//! per parent; siblings that did under 5 % of the I/O are throttled like
//! the others; the induced delay for I/O that cannot wait (swap, metadata
//! issued as root) does not arise here.
//!
//! Invariants: a group never has more requests allocated (held by the
//! inner policy or on the device) than its current depth, except the ones
//! it had when the depth fell; every inserted request reaches the inner
//! policy exactly once, and a held one let in (in `dispatch` or at a
//! completion) that merges there gives its block-layer slot back
//! (`group::LateInsert`).

use super::{GroupLayerType, LateInsert, LayerContext, Layered};
use crate::{Dispatch, Scheduler};
use elevator_core::{Duration, GroupId, GroupTree, Instant, QueueLimits, Request};
use std::collections::VecDeque;

/// io.latency in the registry: on when a group has a latency target.
pub const TYPE: GroupLayerType = GroupLayerType {
    name: "io.latency",
    honours: "targets",
    about: "per-group latency targets: looser siblings get less queue depth, any policy",
    keys: &["group.latency_target"],
    build: |inner, cx: &LayerContext<'_>| {
        if !cx.groups.has_latency_targets() {
            return Layered::absent(inner);
        }
        Layered {
            scheduler: Box::new(LatencyLimiter::new(inner, cx.groups.clone(), cx.limits)),
            shown: None,
        }
    },
};

/// A miss scales siblings down at most this often (the kernel's 500 ms).
pub const SCALE_INTERVAL: Duration = Duration::from_millis(500);
/// Protection lapses when the protected group is idle this long (1 s timer).
pub const IDLE_RELEASE: Duration = Duration::from_secs(1);
/// Windows with fewer completions than this do not count (the kernel's 5).
pub const MIN_SAMPLES: u64 = 5;

#[derive(Debug, Default, Clone)]
struct Window {
    start: Instant,
    samples: u64,
    sum_ns: u128,
    missed: u64,
}

#[derive(Debug, Default)]
struct GroupState {
    target: Option<Duration>,
    window: Window,
    allocated: usize,
    held: VecDeque<Request>,
    last_io: Instant,
}

/// Per parent: the depth its looser children may use.
#[derive(Debug, Default, Clone, Copy)]
struct Scale {
    depth: Option<usize>,
    /// Children with a target at most this are protected, not throttled.
    protected: Option<Duration>,
    protected_group: Option<GroupId>,
    last_change: Option<Instant>,
}

/// A policy behind io.latency.
#[derive(Debug)]
pub struct LatencyLimiter {
    inner: Box<dyn Scheduler>,
    tree: GroupTree,
    rotational: bool,
    qd: usize,
    groups: Vec<GroupState>,
    scales: Vec<Scale>,
    held_count: usize,
    /// Slots of released requests that merged in the inner policy.
    late: LateInsert,
}

impl LatencyLimiter {
    pub fn new(inner: Box<dyn Scheduler>, tree: GroupTree, limits: &QueueLimits) -> Self {
        let groups = tree
            .iter()
            .map(|g| GroupState {
                target: g.latency_target,
                ..GroupState::default()
            })
            .collect();
        // blk_queue_depth(): the device's tag depth, or nr_requests (128)
        // for a queue without tagging.
        let qd = if limits.queue_depth > 1 {
            limits.queue_depth as usize
        } else {
            128
        };
        LatencyLimiter {
            inner,
            scales: vec![Scale::default(); tree.len()],
            tree,
            rotational: limits.rotational,
            qd,
            groups,
            held_count: 0,
            late: LateInsert::default(),
        }
    }

    /// The current depth limit of group `g`, if any.
    pub fn depth_of(&self, g: GroupId) -> Option<usize> {
        let parent = self.tree.get(g).parent?;
        let scale = &self.scales[parent.0 as usize];
        let depth = scale.depth?;
        let protected = scale.protected?;
        match self.groups[g.0 as usize].target {
            Some(t) if t <= protected => None,
            _ => Some(depth),
        }
    }

    fn group_of(&self, r: &Request) -> GroupId {
        if (r.group.0 as usize) < self.groups.len() {
            r.group
        } else {
            GroupId::ROOT
        }
    }

    fn window_len(target: Duration) -> Duration {
        Duration(target.mul(16).nanos().clamp(100_000_000, 1_000_000_000))
    }

    /// Account one completion of group `g` and act at the end of a window.
    fn observe(&mut self, g: GroupId, latency: Duration, now: Instant) {
        let Some(target) = self.groups[g.0 as usize].target else {
            return;
        };
        let state = &mut self.groups[g.0 as usize];
        if state.window.samples == 0 && state.window.start == Instant::ZERO {
            state.window.start = now;
        }
        state.window.samples += 1;
        state.window.sum_ns += u128::from(latency.nanos());
        if latency >= target {
            state.window.missed += 1;
        }
        if now.since(state.window.start) < Self::window_len(target) {
            return;
        }
        let w = std::mem::take(&mut state.window);
        state.window.start = now;
        if w.samples < MIN_SAMPLES {
            return;
        }
        let missed = if self.rotational {
            w.sum_ns / u128::from(w.samples) > u128::from(target.nanos())
        } else {
            w.missed * 10 >= w.samples
        };
        let Some(parent) = self.tree.get(g).parent else {
            return;
        };
        let qd = self.qd;
        let scale = &mut self.scales[parent.0 as usize];
        if missed {
            if scale
                .last_change
                .is_some_and(|t| now.since(t) < SCALE_INTERVAL)
            {
                return;
            }
            scale.depth = Some(match scale.depth {
                None => (qd / 2).max(1),
                Some(d) => (d / 2).max(1),
            });
            if scale.protected.is_none_or(|p| target < p) {
                scale.protected = Some(target);
                scale.protected_group = Some(g);
            }
            scale.last_change = Some(now);
        } else if scale.protected_group == Some(g) {
            if let Some(d) = scale.depth {
                let d = d + (qd / 16).max(1);
                if d >= qd {
                    *scale = Scale::default();
                } else {
                    scale.depth = Some(d);
                    scale.last_change = Some(now);
                }
            }
        }
    }

    /// Lift protection whose group went idle, then let held requests in.
    fn release(&mut self, now: Instant) {
        for p in 0..self.scales.len() {
            if let Some(g) = self.scales[p].protected_group {
                if now.since(self.groups[g.0 as usize].last_io) >= IDLE_RELEASE {
                    self.scales[p] = Scale::default();
                }
            }
        }
        if self.held_count == 0 {
            return;
        }
        for g in 0..self.groups.len() {
            let id = GroupId(g as u32);
            while !self.groups[g].held.is_empty()
                && self
                    .depth_of(id)
                    .is_none_or(|d| self.groups[g].allocated < d)
            {
                let r = self.groups[g].held.pop_front().expect("non-empty");
                self.held_count -= 1;
                self.groups[g].allocated += 1;
                self.late.insert(&mut *self.inner, r, now);
            }
        }
    }

    /// When a lapse of protection would release held requests.
    fn next_lapse(&self) -> Option<Instant> {
        self.scales
            .iter()
            .filter_map(|s| s.protected_group)
            .map(|g| self.groups[g.0 as usize].last_io + IDLE_RELEASE)
            .min()
    }
}

impl Scheduler for LatencyLimiter {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn insert(&mut self, request: Request, now: Instant) {
        let g = self.group_of(&request);
        self.groups[g.0 as usize].last_io = now;
        let room = self
            .depth_of(g)
            .is_none_or(|d| self.groups[g.0 as usize].allocated < d);
        if room && self.groups[g.0 as usize].held.is_empty() {
            self.groups[g.0 as usize].allocated += 1;
            self.inner.insert(request, now);
        } else {
            self.groups[g.0 as usize].held.push_back(request);
            self.held_count += 1;
        }
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        self.release(now);
        match self.inner.dispatch(now) {
            Dispatch::Empty if self.held_count > 0 => match self.next_lapse() {
                Some(t) => Dispatch::Wait {
                    until: t.max(now + Duration(1)),
                },
                None => Dispatch::Empty,
            },
            other => other,
        }
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        self.inner.complete(request, now);
        let g = self.group_of(request);
        let parts = 1 + request.merged.len();
        let state = &mut self.groups[g.0 as usize];
        state.allocated = state.allocated.saturating_sub(parts);
        state.last_io = now;
        self.observe(g, now.since(request.arrival), now);
        self.release(now);
    }

    fn queued(&self) -> usize {
        self.inner.queued() + self.held_count
    }

    forward_to_inner!();

    fn check_invariants(&self) -> Result<(), String> {
        self.inner.check_invariants()
    }

    fn dispatch_reason(&self) -> Option<&'static str> {
        self.inner.dispatch_reason()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use elevator_core::IoMax;

    #[test]
    fn a_missing_group_halves_its_looser_siblings_depth_and_recovers() {
        let mut tree = GroupTree::default();
        let tight = tree.add("db", GroupId::ROOT, 100, IoMax::default());
        tree.set_latency_target(tight, Some(Duration::from_millis(10)));
        let loose = tree.add("batch", GroupId::ROOT, 100, IoMax::default());
        let limits = QueueLimits {
            rotational: false,
            queue_depth: 32,
            ..QueueLimits::default()
        };
        let noop = crate::find("noop").unwrap().build_default(&limits);
        let mut l = LatencyLimiter::new(noop, tree, &limits);
        let mut now = Instant::ZERO;
        // Slow completions of the protected group: a missed window.
        for i in 0..20u64 {
            let mut r = Request::read(i, 1, i * 100, 8);
            r.group = tight;
            r.arrival = now;
            l.insert(r.clone(), now);
            let Dispatch::Request(d) = l.dispatch(now) else {
                panic!()
            };
            now += Duration::from_millis(20);
            l.complete(&d, now);
        }
        assert_eq!(l.depth_of(loose), Some(16));
        assert_eq!(l.depth_of(tight), None);
        // Fast completions: depth grows back by qd/16 per good window.
        for i in 20..200u64 {
            let mut r = Request::read(i, 1, i * 100, 8);
            r.group = tight;
            r.arrival = now;
            l.insert(r, now);
            let Dispatch::Request(d) = l.dispatch(now) else {
                panic!()
            };
            now += Duration::from_millis(1);
            l.complete(&d, now);
        }
        assert!(
            l.depth_of(loose).is_none_or(|d| d > 16),
            "{:?}",
            l.depth_of(loose)
        );
        // Idle protected group: protection lapses.
        now += Duration::from_secs(2);
        l.release(now);
        assert_eq!(l.depth_of(loose), None);
    }
}
