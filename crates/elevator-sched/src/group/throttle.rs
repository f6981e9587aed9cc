//! blk-throttle: per-group bytes/s and I/Os/s limits (cgroup v2 `io.max`).
//!
//! After block/blk-throttle.c (Linux 3.x–6.x; Vivek Goyal, 2.6.37) and the
//! cgroup v2 documentation. Each limited group keeps, per direction, a time
//! slice (`throtl_slice`, 100 ms) with the bytes and I/Os it let through
//! since the slice started. A request may pass at `now` if, with
//! `elapsed` = time since the slice started (at least one slice while the
//! slice is fresh, i.e. not yet trimmed), `bytes_disp + size <= bps ×
//! elapsed` and `io_disp + 1 <= iops × elapsed`; otherwise it waits for the
//! time at which both hold. A group with nothing held whose slice has run out
//! starts a new one; one still holding requests extends it. After each
//! pass the slice is trimmed: whole slices that have gone by are
//! subtracted, with what they allowed, so unused credit older than a slice
//! is forfeited.
//!
//! Hierarchy (cgroup v2): a request passes only when its group and every
//! ancestor allow it, and then counts against all of them, so a child never
//! exceeds its parent's limit. Held requests keep FIFO order per group and
//! direction; a group's head is never overtaken by its later requests.
//!
//! Departure from the kernel: `tg_with_in_bps_limit` rounds `elapsed` up
//! to whole slices, so at a slice boundary a group may pass up to two
//! slices' worth in a moment, and every trim hands out the rest of the
//! current slice again. We use the exact elapsed time, with one slice of
//! credit only in a fresh slice, so a group's only burst is that slice;
//! long-run rates are the same.
//!
//! Invariants: every inserted request is either held here or handed to the
//! inner policy, exactly once; over any window of length `W` a group lets
//! through at most `limit × (W + throtl_slice)` (one slice of burst, the
//! credit a fresh slice starts with); the kernel's rounding allows two. A
//! held request let through in `dispatch` that merges in the inner policy
//! gives its block-layer slot back (`group::LateInsert`).

use super::{GroupLayerType, LateInsert, LayerContext, Layered};
use crate::{Dispatch, Scheduler};
use elevator_core::{Duration, GroupId, GroupTree, Instant, Op, Request};
use std::collections::VecDeque;

/// blk-throttle in the registry: on when a group has an `io.max` limit.
pub const TYPE: GroupLayerType = GroupLayerType {
    name: "io.max",
    honours: "limits",
    about: "blk-throttle: per-group bytes/s and IOPS limits, in front of any policy",
    keys: &["group.io_max"],
    build: |inner, cx: &LayerContext<'_>| {
        if !cx.groups.has_limits() {
            return Layered::absent(inner);
        }
        Layered {
            scheduler: Box::new(Throttle::new(inner, cx.groups.clone())),
            shown: None,
        }
    },
};

/// `throtl_slice`: 100 ms (HZ/10; 20 ms on SSDs from 4.10 until 2025, when
/// one 100 ms slice was restored, see the reference notes §9.6).
pub const THROTL_SLICE: Duration = Duration::from_millis(100);

const NS_PER_S: u128 = 1_000_000_000;

/// One group's accounting in one direction.
#[derive(Clone, Copy, Debug, Default)]
struct Slice {
    start: Instant,
    end: Instant,
    bytes: u64,
    ios: u64,
    /// Not trimmed since it started: its allowance is at least one slice.
    fresh: bool,
}

/// Limits of one group in one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Limit {
    bps: Option<u64>,
    iops: Option<u64>,
}

impl Limit {
    fn is_none(&self) -> bool {
        self.bps.is_none() && self.iops.is_none()
    }
}

const READ: usize = 0;
const WRITE: usize = 1;

fn dir_of(r: &Request) -> usize {
    if r.op == Op::Read {
        READ
    } else {
        WRITE
    }
}

/// A policy behind blk-throttle.
#[derive(Debug)]
pub struct Throttle {
    inner: Box<dyn Scheduler>,
    tree: GroupTree,
    slice_len: Duration,
    limits: Vec<[Limit; 2]>,
    slices: Vec<[Slice; 2]>,
    held: Vec<[VecDeque<Request>; 2]>,
    /// Requests held in each group's subtree, per direction.
    held_below: Vec<[usize; 2]>,
    held_count: usize,
    /// Slots of released requests that merged in the inner policy.
    late: LateInsert,
}

impl Throttle {
    pub fn new(inner: Box<dyn Scheduler>, tree: GroupTree) -> Self {
        Throttle::with_slice(inner, tree, THROTL_SLICE)
    }

    pub fn with_slice(inner: Box<dyn Scheduler>, tree: GroupTree, slice_len: Duration) -> Self {
        let n = tree.len();
        let limits = tree
            .iter()
            .map(|g| {
                [
                    Limit {
                        bps: g.max.rbps,
                        iops: g.max.riops,
                    },
                    Limit {
                        bps: g.max.wbps,
                        iops: g.max.wiops,
                    },
                ]
            })
            .collect();
        Throttle {
            inner,
            tree,
            slice_len: Duration(slice_len.nanos().max(1)),
            limits,
            slices: vec![[Slice::default(); 2]; n],
            held: (0..n).map(|_| [VecDeque::new(), VecDeque::new()]).collect(),
            held_below: vec![[0, 0]; n],
            held_count: 0,
            late: LateInsert::default(),
        }
    }

    /// The group a request is charged to (unknown groups count as root).
    fn group_of(&self, r: &Request) -> GroupId {
        if (r.group.0 as usize) < self.tree.len() {
            r.group
        } else {
            GroupId::ROOT
        }
    }

    /// How long group `g` makes a request of `bytes` in `dir` wait at `now`,
    /// given its slice (zero: it may pass).
    fn wait_in(&self, g: usize, dir: usize, bytes: u64, now: Instant) -> Duration {
        let limit = self.limits[g][dir];
        if limit.is_none() {
            return Duration::ZERO;
        }
        let s = self.slices[g][dir];
        let elapsed = now.since(s.start).nanos();
        // The allowance grows with the exact time since the slice started;
        // a fresh slice starts with one slice's worth (see the module docs).
        let span = if s.fresh {
            elapsed.max(self.slice_len.nanos())
        } else {
            elapsed
        };
        let mut wait = 0u64;
        if let Some(bps) = limit.bps {
            let allowed = (u128::from(bps) * u128::from(span) / NS_PER_S) as u64;
            let need = s.bytes + bytes;
            if need > allowed {
                let at = (u128::from(need) * NS_PER_S).div_ceil(u128::from(bps)) as u64;
                wait = wait.max(at.saturating_sub(elapsed).max(1));
            }
        }
        if let Some(iops) = limit.iops {
            let allowed = (u128::from(iops) * u128::from(span) / NS_PER_S) as u64;
            if s.ios + 1 > allowed {
                let at = (u128::from(s.ios + 1) * NS_PER_S).div_ceil(u128::from(iops)) as u64;
                wait = wait.max(at.saturating_sub(elapsed).max(1));
            }
        }
        Duration(wait)
    }

    /// Bring the slices on `g`'s path up to `now`: a group with nothing
    /// held in its subtree whose slice ran out starts a new one (the
    /// kernel's `throtl_start_new_slice`); any other has its slice extended
    /// to at least one slice from now (`throtl_extend_slice`).
    fn refresh(&mut self, g: GroupId, dir: usize, now: Instant) {
        let slice = self.slice_len;
        for a in self.tree.path(g) {
            let a = a.0 as usize;
            if self.limits[a][dir].is_none() {
                continue;
            }
            let s = &mut self.slices[a][dir];
            if now >= s.end && self.held_below[a][dir] == 0 {
                *s = Slice {
                    start: now,
                    end: now + slice,
                    bytes: 0,
                    ios: 0,
                    fresh: true,
                };
            } else if s.end < now + slice {
                s.end = now + slice;
            }
        }
    }

    /// How long the whole path of `g` makes `bytes` in `dir` wait.
    fn path_wait(&self, g: GroupId, dir: usize, bytes: u64, now: Instant) -> Duration {
        self.tree
            .path(g)
            .map(|a| self.wait_in(a.0 as usize, dir, bytes, now))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// Count a passing request against `g` and its ancestors, then trim.
    fn charge(&mut self, g: GroupId, dir: usize, bytes: u64, now: Instant) {
        let slice = self.slice_len;
        let path: Vec<GroupId> = self.tree.path(g).collect();
        for a in path {
            let a = a.0 as usize;
            let limit = self.limits[a][dir];
            if limit.is_none() {
                continue;
            }
            let mut s = self.slices[a][dir];
            s.bytes += bytes;
            s.ios += 1;
            // Trim whole slices gone by, with what they allowed.
            let gone = now.since(s.start).nanos() / slice.nanos();
            if gone > 0 {
                let span = u128::from(gone * slice.nanos());
                if let Some(bps) = limit.bps {
                    s.bytes = s
                        .bytes
                        .saturating_sub((u128::from(bps) * span / NS_PER_S) as u64);
                }
                if let Some(iops) = limit.iops {
                    s.ios = s
                        .ios
                        .saturating_sub((u128::from(iops) * span / NS_PER_S) as u64);
                }
                s.start += Duration(gone * slice.nanos());
                s.fresh = false;
            }
            self.slices[a][dir] = s;
        }
    }

    /// Hand every held request that may pass now to the inner policy.
    fn release(&mut self, now: Instant) {
        if self.held_count == 0 {
            return;
        }
        let mut progress = true;
        while progress {
            progress = false;
            for g in 0..self.held.len() {
                for dir in [READ, WRITE] {
                    while let Some(head) = self.held[g][dir].front() {
                        let bytes = head.bytes();
                        self.refresh(GroupId(g as u32), dir, now);
                        if self.path_wait(GroupId(g as u32), dir, bytes, now) > Duration::ZERO {
                            break;
                        }
                        let request = self.held[g][dir].pop_front().expect("head");
                        self.unhold(GroupId(g as u32), dir);
                        self.charge(GroupId(g as u32), dir, bytes, now);
                        self.late.insert(&mut *self.inner, request, now);
                        progress = true;
                    }
                }
            }
        }
    }

    fn unhold(&mut self, g: GroupId, dir: usize) {
        self.held_count -= 1;
        for a in self.tree.path(g) {
            self.held_below[a.0 as usize][dir] -= 1;
        }
    }

    /// When the earliest held request may pass.
    fn next_release(&self, now: Instant) -> Option<Instant> {
        let mut best: Option<Instant> = None;
        for (g, dirs) in self.held.iter().enumerate() {
            for (dir, q) in dirs.iter().enumerate() {
                if let Some(head) = q.front() {
                    let at = now + self.path_wait(GroupId(g as u32), dir, head.bytes(), now);
                    best = Some(best.map_or(at, |b| b.min(at)));
                }
            }
        }
        best
    }
}

impl Scheduler for Throttle {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn insert(&mut self, request: Request, now: Instant) {
        let g = self.group_of(&request);
        let dir = dir_of(&request);
        let limited = self
            .tree
            .path(g)
            .any(|a| !self.limits[a.0 as usize][dir].is_none());
        if !limited {
            self.inner.insert(request, now);
            return;
        }
        // A request arriving at an empty queue is checked at once, against
        // slices refreshed for it; otherwise it waits behind the others.
        if self.held[g.0 as usize][dir].is_empty() {
            self.refresh(g, dir, now);
            let bytes = request.bytes();
            if self.path_wait(g, dir, bytes, now) == Duration::ZERO {
                self.charge(g, dir, bytes, now);
                self.inner.insert(request, now);
                return;
            }
        }
        self.held[g.0 as usize][dir].push_back(request);
        self.held_count += 1;
        for a in self.tree.path(g) {
            self.held_below[a.0 as usize][dir] += 1;
        }
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        self.release(now);
        let held_until = self.next_release(now).map(|t| t.max(now + Duration(1)));
        match self.inner.dispatch(now) {
            Dispatch::Request(r) => Dispatch::Request(r),
            Dispatch::Wait { until } => Dispatch::Wait {
                until: held_until.map_or(until, |h| h.min(until)),
            },
            Dispatch::Empty => match held_until {
                Some(until) => Dispatch::Wait { until },
                None => Dispatch::Empty,
            },
        }
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        self.inner.complete(request, now);
    }

    fn queued(&self) -> usize {
        self.inner.queued() + self.held_count
    }

    forward_to_inner!();

    fn check_invariants(&self) -> Result<(), String> {
        self.inner.check_invariants()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use elevator_core::{IoMax, QueueLimits};

    use crate::harness::{
        Case, DeviceSpec, Layout, OpKind, OpMix, Options, Phase, Run, Service, TaskScript,
        Workload, REGION,
    };

    /// A device that takes every request at once and serves it in a
    /// nanosecond: a request goes out the moment the layer lets it.
    fn instant() -> DeviceSpec {
        DeviceSpec {
            limits: QueueLimits {
                queue_depth: 1024,
                max_sectors: 2048,
                ..QueueLimits::default()
            },
            service: Service::Uniform {
                min: Duration(1),
                max: Duration(1),
            },
            seed: 0,
        }
    }

    fn noop() -> Box<dyn Scheduler> {
        crate::find("noop")
            .unwrap()
            .build_default(&instant().limits)
    }

    fn tree(max: &str) -> (GroupTree, GroupId) {
        let mut t = GroupTree::default();
        let g = t.add("g", GroupId::ROOT, 100, max.parse::<IoMax>().unwrap());
        (t, g)
    }

    /// Task `task` of `group` issuing `count` requests of `op` and
    /// `sectors` each at time zero, `stride` sectors apart.
    fn backlog(
        task: u32,
        group: GroupId,
        op: OpKind,
        count: u32,
        sectors: u32,
        stride: u64,
    ) -> TaskScript {
        let all = Phase {
            ops: OpMix::Only(op),
            burst: true,
            ..Phase::reads(count, sectors, Layout::Strided { stride })
        };
        TaskScript {
            group,
            ..TaskScript::new(task, REGION * u64::from(task), vec![all])
        }
    }

    /// Run `tasks` through `s` on the instant device until `until`, as
    /// fast as the limits allow; the dispatch times, in order.
    fn drain(s: Throttle, tasks: Vec<TaskScript>, until: Instant) -> Vec<Instant> {
        let case = Case {
            workload: Workload { tasks },
            device: instant(),
        };
        let options = Options {
            // The limits make waits as long as they say.
            liveness_limit: None,
            check_starvation: false,
            ..Options::default()
        };
        let mut run = Run::new(Box::new(s), &case, &options);
        let checked = run.run_until(until).and_then(|()| run.finish());
        checked.unwrap_or_else(|v| panic!("{v}"));
        let mut out: Vec<(u64, Instant)> = case
            .workload
            .tasks
            .iter()
            .flat_map(|t| &run.stats(t.task).served)
            .map(|s| (s.order, s.dispatched))
            .collect();
        out.sort();
        out.into_iter().map(|(_, t)| t).collect()
    }

    #[test]
    fn bps_limit_holds_over_a_second() {
        // 10 MiB/s, 1 MiB reads: ~10 per second after the first slice's burst.
        let (t, g) = tree("rbps=10m");
        let s = Throttle::new(noop(), t);
        let reads = backlog(1, g, OpKind::Read, 40, 2048, 2048);
        let out = drain(s, vec![reads], Instant::ZERO + Duration::from_secs(10));
        assert_eq!(out.len(), 40);
        let last = out.last().unwrap().as_secs_f64();
        // 40 MiB at 10 MiB/s: about 4 s (less one slice of initial credit).
        assert!((3.8..=4.05).contains(&last), "{last}");
    }

    #[test]
    fn iops_limit_and_unlimited_groups() {
        let (mut t, g) = tree("wiops=50");
        let free = t.add("free", GroupId::ROOT, 100, IoMax::default());
        let s = Throttle::new(noop(), t);
        let tasks = vec![
            backlog(1, g, OpKind::AsyncWrite, 50, 8, 200),
            backlog(2, free, OpKind::AsyncWrite, 50, 8, 200),
        ];
        let out = drain(s, tasks, Instant::ZERO + Duration::from_secs(5));
        // The 50 unlimited writes pass at once, with the limited group's
        // first slice of credit.
        assert_eq!(out.iter().filter(|t| **t == Instant::ZERO).count(), 50 + 5);
        assert_eq!(out.len(), 100);
        let last = out.last().unwrap().as_secs_f64();
        assert!((0.85..=1.05).contains(&last), "{last}");
    }

    #[test]
    fn a_child_never_exceeds_its_parent() {
        let mut t = GroupTree::default();
        let parent = t.add("p", GroupId::ROOT, 100, "rbps=1m".parse().unwrap());
        let child = t.add("c", parent, 100, "rbps=100m".parse().unwrap());
        let s = Throttle::new(noop(), t);
        let reads = backlog(1, child, OpKind::Read, 20, 256, 512);
        let out = drain(s, vec![reads], Instant::ZERO + Duration::from_secs(10));
        // 20 x 128 KiB = 2.5 MiB at 1 MiB/s.
        let last = out.last().unwrap().as_secs_f64();
        assert!((2.3..=2.6).contains(&last), "{last}");
    }
}
