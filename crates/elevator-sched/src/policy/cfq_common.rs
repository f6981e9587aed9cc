//! What the two CFQs share: `cfq` (2.6.33-3.x) and `cfq-2.6.32` were built
//! from the same block/cfq-iosched.c at two versions, and these parts did
//! not change between them (v2.6.32 and v3.10 read alike here).
//!
//! - the tunables both versions have, with the defaults both have
//!   (`cfq_fifo_expire`, `cfq_back_max`, `cfq_back_penalty`,
//!   `cfq_slice`, `cfq_slice_async_rq`, `cfq_slice_idle`), and the
//!   values read back from a run's [`Tunables`] ([`Settings`]);
//! - a queue's FIFO of deadlines ([`Fifo`]): `cfq_add_rq_rb`'s deadline on
//!   insert, `cfq_merged_requests`' rule that the survivor of a merge keeps
//!   the earlier deadline, `cfq_check_fifo` looking once per slice;
//! - the one-way elevator inside a queue: `cfq_choose_req` and
//!   `cfq_find_next_rq`.
//!
//! What differs stays in each module, named there: `quantum` (4 in
//! 2.6.30-2.6.33, 8 from 2.6.34), `low_latency`'s meaning (2.6.32: the
//! async ramp only; 3.x: slice scaling too), groups, workload trees and
//! `target_latency` (3.x), and 2.6.32's one service tree, `sort_level` and
//! close cooperators.

use crate::{BackSeek, MergeRule, SortedQueue, Tunable, Tunables};
use elevator_core::{Duration, Instant, IoClass, IoPrio, QueueLimits, Request, RequestId, Sector};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// FIFO deadline of sync requests, HZ/8 (`cfq_fifo_expire[1]`, v2.6.32
/// and 3.10).
pub const FIFO_EXPIRE_SYNC_MS: i64 = 125;
/// FIFO deadline of async requests, HZ/4 (`cfq_fifo_expire[0]`).
pub const FIFO_EXPIRE_ASYNC_MS: i64 = 250;
/// Longest backward seek the elevator takes, 16 MiB (`cfq_back_max`).
pub const BACK_SEEK_MAX_KIB: i64 = 16 * 1024;
/// A backward seek counts this many times its distance (`cfq_back_penalty`).
pub const BACK_SEEK_PENALTY: i64 = 2;
/// Base sync slice, HZ/10 (`cfq_slice_sync`).
pub const SLICE_SYNC_MS: i64 = 100;
/// Base async slice, HZ/25 (`cfq_slice_async`).
pub const SLICE_ASYNC_MS: i64 = 40;
/// Base async request budget per slice (`cfq_slice_async_rq`).
pub const SLICE_ASYNC_RQ: i64 = 2;
/// Idling wait for a sync queue's next request, HZ/125 (`cfq_slice_idle`).
pub const SLICE_IDLE_MS: i64 = 8;
/// `low_latency` on (`cfq_latency`, new in 2.6.32; what it switches on
/// differs by version, see each module).
pub const LOW_LATENCY: i64 = 1;

/// One jiffy at HZ = 1000.
pub(crate) const JIFFY: Duration = Duration::from_millis(1);
/// Shortest slice or idle wait, 2 jiffies (`CFQ_MIN_TT`).
pub(crate) const MIN_TT: Duration = Duration::from_millis(2);
/// Slice step per level is base / 5 (`CFQ_SLICE_SCALE`).
pub(crate) const SLICE_SCALE: i64 = 5;
/// Depth that means command queueing (`CFQ_HW_QUEUE_MIN`).
pub(crate) const HW_QUEUE_MIN: u32 = 5;
/// Samples behind a `hw_tag` decision (`cfq_update_hw_tag`).
pub(crate) const HW_TAG_SAMPLES: u32 = 50;
/// A request this close to the head is "close" (`CFQQ_CLOSE_THR` in 3.x,
/// `CIC_SEEK_THR` in 2.6.32: 4 MiB both).
pub(crate) const CLOSE_THR: Sector = 8 * 1024;

/// The tunables both versions have, in the kernel's sysfs order, from
/// `quantum` to `slice_idle` and then `low_latency`: each version gives its
/// own `quantum` default and says what its `quantum` and `low_latency` do.
pub(crate) const fn tunables(
    quantum: i64,
    quantum_about: &'static str,
    low_latency_about: &'static str,
) -> [Tunable; 10] {
    [
        row("quantum", quantum, "requests", quantum_about),
        row(
            "fifo_expire_sync",
            FIFO_EXPIRE_SYNC_MS,
            "ms",
            "FIFO deadline of sync requests within their queue",
        ),
        row(
            "fifo_expire_async",
            FIFO_EXPIRE_ASYNC_MS,
            "ms",
            "FIFO deadline of async requests within their queue",
        ),
        row(
            "back_seek_max",
            BACK_SEEK_MAX_KIB,
            "KiB",
            "longest backward seek taken instead of wrapping",
        ),
        row(
            "back_seek_penalty",
            BACK_SEEK_PENALTY,
            "factor",
            "cost of a backward seek relative to a forward one",
        ),
        row(
            "slice_sync",
            SLICE_SYNC_MS,
            "ms",
            "base time slice of a sync queue (level 4)",
        ),
        row(
            "slice_async",
            SLICE_ASYNC_MS,
            "ms",
            "base time slice of an async queue (level 4)",
        ),
        row(
            "slice_async_rq",
            SLICE_ASYNC_RQ,
            "requests",
            "base request budget of an async slice",
        ),
        row(
            "slice_idle",
            SLICE_IDLE_MS,
            "ms",
            "idle wait for a sync queue's next request (0: never idle)",
        ),
        row("low_latency", LOW_LATENCY, "bool", low_latency_about),
    ]
}

const fn row(name: &'static str, default: i64, unit: &'static str, about: &'static str) -> Tunable {
    Tunable {
        name,
        default,
        unit,
        about,
    }
}

/// The settings both versions read from the tunables of [`tunables`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    pub quantum: u32,
    /// [async, sync]
    pub fifo_expire: [Duration; 2],
    pub back_seek: BackSeek,
    /// [async, sync], at least a jiffy.
    pub slice: [Duration; 2],
    pub slice_async_rq: u32,
    pub slice_idle: Duration,
    pub low_latency: bool,
}

impl Settings {
    pub fn read(t: &Tunables) -> Self {
        let ms = |name: &str| Duration::from_millis(t.get(name) as u64);
        Settings {
            quantum: t.get("quantum").max(1) as u32,
            fifo_expire: [ms("fifo_expire_async"), ms("fifo_expire_sync")],
            back_seek: BackSeek {
                max: t.get("back_seek_max") as u64 * 2,
                penalty: t.get("back_seek_penalty").max(1) as u64,
            },
            slice: [ms("slice_async").max(JIFFY), ms("slice_sync").max(JIFFY)],
            slice_async_rq: t.get("slice_async_rq").max(1) as u32,
            slice_idle: ms("slice_idle"),
            low_latency: t.get("low_latency") != 0,
        }
    }
}

/// A queue's requests by FIFO deadline (`cfq_queue.fifo`, with each
/// request's deadline as `rq_fifo_time`).
#[derive(Debug, Default)]
pub(crate) struct Fifo {
    /// (deadline, id), earliest first.
    order: BTreeSet<(Instant, RequestId)>,
    time: FxHashMap<RequestId, Instant>,
}

impl Fifo {
    /// Queue `rid` with its deadline.
    pub fn add(&mut self, rid: RequestId, deadline: Instant) {
        self.order.insert((deadline, rid));
        self.time.insert(rid, deadline);
    }

    /// Take `rid` off (it is queued).
    pub fn remove(&mut self, rid: RequestId) {
        let t = self
            .time
            .remove(&rid)
            .expect("queued request has a deadline");
        self.order.remove(&(t, rid));
    }

    /// `gone` was merged into `survivor` (`cfq_merged_requests`): the
    /// survivor keeps the earlier deadline of the two, and takes `gone`'s
    /// place as the queue's next request.
    pub fn absorb(
        &mut self,
        gone: RequestId,
        survivor: RequestId,
        next_rq: &mut Option<RequestId>,
    ) {
        let gone_time = self.time.remove(&gone).expect("queued");
        self.order.remove(&(gone_time, gone));
        let mine = self.time[&survivor];
        if gone_time < mine {
            self.order.remove(&(mine, survivor));
            self.order.insert((gone_time, survivor));
            self.time.insert(survivor, gone_time);
        }
        if *next_rq == Some(gone) {
            *next_rq = Some(survivor);
        }
    }

    /// `cfq_check_fifo`: once per slice (`checked` is the queue's
    /// `fifo_checked`, cleared when a slice starts), the oldest request if
    /// its deadline has passed.
    pub fn expired_once(&self, checked: &mut bool, now: Instant) -> Option<RequestId> {
        if *checked {
            return None;
        }
        *checked = true;
        self.order
            .iter()
            .next()
            .filter(|&&(deadline, _)| now >= deadline)
            .map(|&(_, rid)| rid)
    }
}

/// Queue `request` in its queue's sorted list and FIFO with `deadline`;
/// returns a copy of it without its merged ids, for the statistics and
/// the preemption checks that follow the insertion.
pub(crate) fn enqueue(
    sorted: &mut SortedQueue,
    fifo: &mut Fifo,
    request: Request,
    deadline: Instant,
) -> Request {
    let info = Request {
        merged: Vec::new(),
        ..request.clone()
    };
    fifo.add(request.id, deadline);
    sorted.insert(request);
    info
}

/// `cfq_choose_req`: the better of two requests of `sorted` for a head at
/// `last`, by the one-way elevator with bounded, penalised back seeks.
pub(crate) fn choose_req(
    sorted: &SortedQueue,
    back_seek: &BackSeek,
    a: Option<RequestId>,
    b: Option<RequestId>,
    last: Sector,
) -> Option<RequestId> {
    let (x, y) = match (a, b) {
        (None, b) => return b,
        (a, None) => return a,
        (Some(x), Some(y)) if x == y => return b,
        (Some(x), Some(y)) => (x, y),
    };
    let (r1, r2) = (
        sorted.get(x).expect("queued"),
        sorted.get(y).expect("queued"),
    );
    Some(if back_seek.prefers(r1, r2, last) {
        x
    } else {
        y
    })
}

/// `cfq_find_next_rq`: the next request after dispatching `last` (still
/// queued), the better of its successor (wrapping to the first) and its
/// predecessor.
pub(crate) fn find_next_rq(
    sorted: &SortedQueue,
    back_seek: &BackSeek,
    last: RequestId,
) -> Option<RequestId> {
    let next = sorted
        .next_after(last)
        .or_else(|| sorted.first().filter(|&f| f != last));
    let prev = sorted.prev_before(last);
    let pos = sorted.get(last).expect("queued").sector;
    choose_req(sorted, back_seek, next, prev, pos)
}

/// How both versions merge: within a queue's own sorted list
/// (`cfq_allow_merge`), front merges on; a shared async queue spans tasks,
/// so merging is not held to one task.
pub(crate) fn merge_rule(limits: &QueueLimits) -> MergeRule {
    MergeRule {
        max_sectors: limits.max_sectors,
        front_merges: true,
        same_task: false,
    }
}

/// Put queue `q` in the slab `slots`, in the freed slot `free` if there is
/// one; returns its index.
pub(crate) fn slab_insert<Q>(slots: &mut Vec<Option<Q>>, free: Option<u32>, q: Q) -> u32 {
    match free {
        Some(i) => {
            slots[i as usize] = Some(q);
            i
        }
        None => {
            slots.push(Some(q));
            slots.len() as u32 - 1
        }
    }
}

/// The level of the shared async queue a request of `prio` (at `level`)
/// goes to: class NONE shares the level-4 one (`IOPRIO_NORM`).
pub(crate) fn async_level(prio: IoPrio, level: u8) -> u8 {
    if prio.class() == IoClass::None {
        4
    } else {
        level
    }
}
