//! cfq-2.6.32: CFQ as Linux 2.6.32 had it, one service tree for all queues.
//!
//! The CFQ that the 2009 debates ran on (2.6.30-2.6.32), rebuilt from
//! `../shared/reference/linux-2.6.3x-era.md` (sections 1-3, read from
//! v2.6.32 block/cfq-iosched.c). Algorithm only: the code is ours. Today's
//! `cfq` (2.6.33-3.x: workload trees, groups, target latency) is a separate
//! module and unchanged.
//!
//! # Entities
//! - A **queue** per task for its sync I/O (reads, O_DIRECT and fsync
//!   writes), and one shared queue per (class, level) for async writes. Each
//!   keeps a sector-sorted list with merging, a FIFO with `fifo_expire_sync`
//!   / `fifo_expire_async` deadlines (looked at once per slice), and
//!   `next_rq`, the next request of a one-way elevator with bounded back
//!   seeks (`BackSeek`).
//! - **One service tree** holding every busy queue (`cfq_service_tree_add`):
//!   RT queues first, IDLE last, and within a class by key. The key is
//!   `now + (busy − 1) × (slice_sync(level 0) − slice(queue)) − slice_resid`;
//!   a preempting queue goes in at the first key − 1 s; an IDLE queue at
//!   the last key + 200 ms (`CFQ_IDLE_DELAY`). **The level is never
//!   compared**: it acts only through the slice length, the key offset and
//!   the async request budget.
//! - **`sort_level`** (0 by default) switches on the ordering of Alan
//!   Brunelle's November 2009 patch "Correct sorting problem in
//!   cfq_service_tree_add": class, then level (0 first), then key. The era
//!   reference could not find the patch or the maintainers' reply ("the
//!   class decides who may use the disk, the level how much time it
//!   gets"); this switch implements the ordering the issue describes, no
//!   more. `cfq-2.6.32-brunelle` is the same policy with it on.
//!
//! # Selection (one request per `dispatch`, `cfq_select_queue`)
//! Keep the active queue while its slice lasts and it has requests. When it
//! runs dry: wait while the idle timer runs, or while its requests are in
//! the driver and it has an idle window; otherwise expire it and take the
//! first queue of the tree. A slice (`slice_sync`/`slice_async` scaled by
//! `base/5 × (4 − level)`) starts at the queue's first completion.
//!
//! Idling (`cfq_arm_slice_timer`, after a completion that leaves the active
//! queue empty, if the request was sync and not `REQ_NOIDLE`): never on a
//! non-rotational device with command queueing (`hw_tag`), never while any
//! request is in the driver, never without an idle window or after the task
//! exited, never when the mean think time exceeds the slice left. The wait
//! is `slice_idle`, 2 ms (`CFQ_MIN_TT`) for a seeky task. The idle window
//! (`cfq_update_idle_window`) is on while the mean think time is at most
//! `slice_idle` (2 ms for a seeker), off for a seeky task on a tagged
//! device when `low_latency` is 0.
//!
//! Dispatch limits (`cfq_may_dispatch`): a queue with an idle window waits
//! for async requests in the driver to drain; an async queue waits while
//! sync queues have requests in the driver; a queue may have `quantum`
//! requests in the driver, `4 × quantum` when it is the only busy queue,
//! one if IDLE; with `low_latency` an async queue's depth is the time since
//! the last sync completion over `slice_sync` (at least one if it has
//! nothing in the driver). An async queue that dispatched `2 ×
//! (slice_async_rq + slice_async_rq × (7 − level))` requests, or an IDLE
//! queue that dispatched one, expires when others are busy.
//!
//! Preemption (a request for queue N while A is active, 2.6.32's
//! `cfq_should_preempt`, first match): yes if A's slice is used; never by
//! IDLE; always of IDLE; yes for a sync request against an async A; yes for
//! metadata when A has none pending; yes for RT against non-RT; yes when A
//! has idled in this slice (`wait_request`, which 2.6.32 keeps until the
//! slice ends) and the request is "close" to the head (`cfq_rq_close`:
//! within the mean seek distance of the task A's slice serves, 4 MiB while
//! that mean has too few samples; 2.6.32 does not cap the mean, so for a
//! seeky task most requests are close) and N has not made a cooperative
//! jump since it was last chosen from the tree (or is the only busy
//! queue); N is then marked as having made one (`coop`, `coop_preempt`).
//!
//! `wait_request` also opens `may_queue`'s once-per-slice `Must`, and a
//! request that comes for the waiting queue marks it `must_dispatch`: it
//! goes out even if the slice ran out meanwhile (`cfq_select_queue`,
//! v2.6.32 block/cfq-iosched.c).
//!
//! # Close cooperators (`cfq_close_cooperator`, `cfqq_close`, v2.6.32)
//! Busy queues are also indexed by the sector of their next request, one
//! index per priority level (the kernel's `prio_trees`). When the active
//! queue has nothing queued (at its completion, and when a queue is
//! selected), CFQ looks for the busy queue of its level whose next request
//! starts where the last dispatched one ended, or failing that the nearest
//! below or above the head, and takes it if that request is close in the
//! sense above. At a completion such a cooperator replaces the idle wait
//! (the probe); at selection the active queue expires (keeping no leftover
//! slice) and the cooperator becomes active at once, marked `coop`. A
//! queue marked `coop` is not taken as a cooperator again until it is
//! chosen from the service tree the ordinary way (which clears the mark,
//! unless the mark came with a preemption, `coop_preempt`). The distance
//! is the *active* task's mean seek distance: a seeky reader's is a third
//! of the span it reads, so for it nearly every other queue is "close",
//! and it hands the disk over after a single request whenever one is.
//!
//! `hw_tag` (`cfq_update_hw_tag`): starts on; whenever more than 5 requests
//! are queued or in the driver, a sample is taken; every 50 samples it is
//! set to whether the driver was seen holding 5 or more (not sticky). A
//! depth-1 device (PATA, MMC) therefore ends with `hw_tag` off and keeps
//! idling even when marked non-rotational.
//!
//! # Modelling notes
//! - Time is in nanoseconds; one jiffy is 1 ms (HZ = 1000).
//! - The level index holds every busy non-IDLE queue keyed by the sector
//!   its next request has now; the kernel re-keys a queue only when a
//!   request is added or the queue is re-sorted, skips a queue whose next
//!   request starts on the sector of another's, and of the two neighbours
//!   of the head looks first at the rbtree parent of the empty leaf; here
//!   the nearer neighbour is looked at first.
//! - A request arriving for the idling active queue stops the idle timer
//!   and is dispatched at once; the kernel let a single small request wait
//!   for the timer (`must_dispatch`) so merges could happen, and ran the
//!   queue when the issuer unplugged it, which a waiting reader does at
//!   once.
//! - There are no groups: CFQ's blkio groups arrived in 2.6.33.
//!
//! # Invariants
//! - A queue is in the service tree exactly when it is busy (`on_rr`), and
//!   a busy queue has requests queued (2.6.32 removed a queue from the tree
//!   when its last request left, `cfq_del_rq_rb`; only the active queue may
//!   be empty and still served).
//! - `rq_queued` is the number of requests in all queues' sorted lists;
//!   `rq_in_driver` the number dispatched and not completed.
//!
//! # Starvation bound
//! None: RT starves BE and IDLE as long as it stays busy.

use super::cfq_common::{
    self, Fifo, Settings, CLOSE_THR, HW_QUEUE_MIN, HW_TAG_SAMPLES, JIFFY, MIN_TT, SLICE_SCALE,
};
use crate::queue::MergeOutcome;
use crate::stats::Ewma;
use crate::{
    BackSeek, Dispatch, MayQueue, MergeRule, Scheduler, SchedulerType, SortedQueue, Tunable,
    Tunables,
};
use elevator_core::{
    Duration, Instant, IoClass, Op, QueueLimits, Request, RequestId, Sector, TaskId, IOPRIO_LEVELS,
};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// Requests a queue may have in the driver (`cfq_quantum`): 4 in
/// 2.6.30-2.6.33, 8 from 2.6.34 (commit abc3c74); era reference, 3.1.
pub const QUANTUM: i64 = 4;
pub use super::cfq_common::{
    BACK_SEEK_MAX_KIB, BACK_SEEK_PENALTY, FIFO_EXPIRE_ASYNC_MS, FIFO_EXPIRE_SYNC_MS, LOW_LATENCY,
    SLICE_ASYNC_MS, SLICE_ASYNC_RQ, SLICE_IDLE_MS, SLICE_SYNC_MS,
};
/// Brunelle's ordering off: 2.6.32 as released compared only the class.
pub const SORT_LEVEL: i64 = 0;

/// A preempting queue's key is the first key minus HZ.
const PREEMPT_KEY_NS: i64 = 1_000_000_000;
/// An IDLE queue's key is the last key plus HZ/5 (`CFQ_IDLE_DELAY`).
const IDLE_DELAY_NS: i64 = 200_000_000;
/// Seeky: mean seek distance above 8192 sectors (`CIC_SEEKY`, v2.6.32).
const SEEKY_MEAN: u64 = 8 * 1024;

/// The tunables both registered names share: CFQ's common ones
/// ([`cfq_common::tunables`]) with 2.6.32's `quantum` and `low_latency`.
const fn tunables() -> [Tunable; 10] {
    cfq_common::tunables(
        QUANTUM,
        "requests a queue may have in the driver while others are busy",
        "ramp async depth up with the time since the last sync completion",
    )
}

const TUNABLES: [Tunable; 11] = with_sort_level(SORT_LEVEL);
const TUNABLES_BRUNELLE: [Tunable; 11] = with_sort_level(1);

const fn with_sort_level(default: i64) -> [Tunable; 11] {
    let t = tunables();
    [
        t[0],
        t[1],
        t[2],
        t[3],
        t[4],
        t[5],
        t[6],
        t[7],
        t[8],
        t[9],
        Tunable {
            name: "sort_level",
            default,
            unit: "bool",
            about: "sort the service tree on class then level (Brunelle, Nov 2009)",
        },
    ]
}

pub const TYPE: SchedulerType = SchedulerType {
    name: "cfq-2.6.32",
    aliases: &["cfq-2632"],
    about: "per-task slices by I/O priority on one service tree sorted by class (Linux 2.6.32 CFQ)",
    honours: &["ioprio"],
    tunables: &TUNABLES,
    build: |t, limits| Box::new(Cfq2632::from_tunables(t, limits, "cfq-2.6.32")),
};

pub const TYPE_BRUNELLE: SchedulerType = SchedulerType {
    name: "cfq-2.6.32-brunelle",
    aliases: &["cfq-2632-brunelle"],
    about: "cfq-2.6.32 with Brunelle's 2009 sort of the service tree on class and level",
    honours: &["ioprio"],
    tunables: &TUNABLES_BRUNELLE,
    build: |t, limits| Box::new(Cfq2632::from_tunables(t, limits, "cfq-2.6.32-brunelle")),
};

/// Index of a queue in the slab.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct QueueId(u32);

/// Service class; the order is the tree's order (RT first, IDLE last).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Class {
    Rt = 0,
    Be = 1,
    Idle = 2,
}

/// Position in the service tree: (class, level or 0, key, sequence).
type TreeKey = (Class, u8, i64, u64, QueueId);

/// One queue (`cfq_queue`).
#[derive(Debug)]
struct Queue {
    sorted: SortedQueue,
    fifo: Fifo,
    next_rq: Option<RequestId>,
    sync: bool,
    class: Class,
    level: u8,
    /// The task of a sync queue, until it exits.
    owner: Option<TaskId>,
    /// In the service tree, at this key.
    tree: Option<TreeKey>,
    slice_new: bool,
    slice_end: Instant,
    /// Leftover (positive) or overrun (negative) slice, ns.
    slice_resid: i64,
    slice_dispatch: u32,
    /// Requests in the driver.
    dispatched: u32,
    meta_pending: u32,
    fifo_checked: bool,
    idle_window: bool,
    /// The once-per-slice `ELV_MQUEUE_MUST` was given (`must_alloc_slice`).
    must_alloc_slice: bool,
    /// The queue idled in this slice (`wait_request`): set when the idle
    /// timer is armed and, as in 2.6.32, kept until the slice ends even
    /// after the awaited request came; it opens the close-request
    /// preemption and `may_queue`'s `Must`.
    wait_request: bool,
    /// A request came while the queue was waiting (`must_dispatch`): it may
    /// dispatch once more even if the slice is used.
    must_dispatch: bool,
    /// Made a cooperative jump and was not chosen from the tree since
    /// (`CFQ_CFQQ_FLAG_coop`).
    coop: bool,
    /// The jump was a preemption by a close request (`coop_preempt`).
    coop_preempt: bool,
    /// Its entry in the level index: (level, sector of `next_rq`).
    prio_key: Option<(u8, Sector)>,
}

impl Queue {
    fn new(sync: bool, class: Class, level: u8, owner: Option<TaskId>) -> Self {
        Queue {
            sorted: SortedQueue::new(),
            fifo: Fifo::default(),
            next_rq: None,
            sync,
            class,
            level,
            owner,
            tree: None,
            slice_new: true,
            slice_end: Instant::ZERO,
            slice_resid: 0,
            slice_dispatch: 0,
            dispatched: 0,
            meta_pending: 0,
            fifo_checked: false,
            idle_window: sync && class != Class::Idle,
            must_alloc_slice: false,
            wait_request: false,
            must_dispatch: false,
            coop: false,
            coop_preempt: false,
            prio_key: None,
        }
    }
}

/// Per-task state (the kernel's `cfq_io_context`): think time and seek
/// distance, 2.6.32's arithmetic.
#[derive(Debug)]
struct TaskState {
    ttime: Ewma,
    last_end_request: Instant,
    seek_samples: u64,
    seek_total: u64,
    seek_mean: u64,
    /// End of its last request; 0 before the first.
    last_request_pos: Sector,
}

impl TaskState {
    fn new(now: Instant) -> Self {
        TaskState {
            ttime: Ewma::default(),
            last_end_request: now,
            seek_samples: 0,
            seek_total: 0,
            seek_mean: 0,
            last_request_pos: 0,
        }
    }

    /// `cfq_update_io_seektime`: the distance, clamped against odd
    /// fragments, into a 7/8-weighted mean.
    fn add_seek(&mut self, sector: Sector) {
        let mut sdist = if self.last_request_pos == 0 {
            0
        } else {
            self.last_request_pos.abs_diff(sector)
        };
        let slack = if self.seek_samples <= 60 {
            2 * 1024 * 1024
        } else {
            2 * 1024 * 64
        };
        sdist = sdist.min(self.seek_mean.saturating_mul(4).saturating_add(slack));
        self.seek_samples = (7 * self.seek_samples + 256) / 8;
        self.seek_total = (7 * self.seek_total + 256u64.saturating_mul(sdist)) / 8;
        self.seek_mean = (self.seek_total + self.seek_samples / 2) / self.seek_samples;
    }

    fn seek_valid(&self) -> bool {
        self.seek_samples > crate::stats::EWMA_VALID_SAMPLES
    }

    fn seeky(&self) -> bool {
        self.seek_mean > SEEKY_MEAN
    }
}

/// The 2.6.32 CFQ policy.
#[derive(Debug)]
pub struct Cfq2632 {
    name: &'static str,
    quantum: u32,
    /// [async, sync]
    fifo_expire: [Duration; 2],
    back_seek: BackSeek,
    /// [async, sync]
    slice: [Duration; 2],
    slice_async_rq: u32,
    slice_idle: Duration,
    low_latency: bool,
    sort_level: bool,
    rotational: bool,
    rule: MergeRule,

    queues: Vec<Option<Queue>>,
    free: Vec<QueueId>,
    sync_queues: FxHashMap<TaskId, QueueId>,
    async_queues: FxHashMap<(Class, u8), QueueId>,
    tasks: FxHashMap<TaskId, TaskState>,
    in_flight: FxHashMap<RequestId, QueueId>,
    tree: BTreeSet<TreeKey>,
    /// Busy non-IDLE queues by (level, sector of next request): the
    /// kernel's `prio_trees`, searched for close cooperators.
    prio: BTreeSet<(u8, Sector, QueueId)>,
    seq: u64,

    busy_queues: u32,
    rq_queued: usize,
    /// [async, sync] requests in the driver, by the request's direction.
    rq_in_driver: [u32; 2],
    /// Requests in the driver from sync queues (`sync_flight`).
    sync_flight: u32,
    last_end_sync_rq: Instant,
    hw_tag: bool,
    hw_tag_samples: u32,
    rq_in_driver_peak: u32,

    idle_timer: Option<Instant>,
    active: Option<QueueId>,
    /// The task of the first request dispatched in this slice, whose seek
    /// distance decides what is close (`active_cic`).
    active_task: Option<TaskId>,
    last_position: Sector,
}

/// What `cfq_should_preempt` decided.
enum Preempt {
    No,
    Yes,
    /// Yes, for a request close to the head: a cooperative jump.
    Close,
}

fn is_sync(r: &Request) -> bool {
    r.op == Op::Read || r.sync
}

impl Cfq2632 {
    pub fn from_tunables(t: &Tunables, limits: &QueueLimits, name: &'static str) -> Self {
        let c = Settings::read(t);
        Cfq2632 {
            name,
            quantum: c.quantum,
            fifo_expire: c.fifo_expire,
            back_seek: c.back_seek,
            slice: c.slice,
            slice_async_rq: c.slice_async_rq,
            slice_idle: c.slice_idle,
            low_latency: c.low_latency,
            sort_level: t.get("sort_level") != 0,
            rotational: limits.rotational,
            rule: cfq_common::merge_rule(limits),
            queues: Vec::new(),
            free: Vec::new(),
            sync_queues: FxHashMap::default(),
            async_queues: FxHashMap::default(),
            tasks: FxHashMap::default(),
            in_flight: FxHashMap::default(),
            tree: BTreeSet::new(),
            prio: BTreeSet::new(),
            seq: 0,
            busy_queues: 0,
            rq_queued: 0,
            rq_in_driver: [0, 0],
            sync_flight: 0,
            last_end_sync_rq: Instant::ZERO,
            hw_tag: true,
            hw_tag_samples: 0,
            rq_in_driver_peak: 0,
            idle_timer: None,
            active: None,
            active_task: None,
            last_position: 0,
        }
    }

    /// With the kernel's defaults (class-only sort).
    pub fn new(limits: &QueueLimits) -> Self {
        let t = TYPE.tunables(std::iter::empty()).expect("defaults");
        Cfq2632::from_tunables(&t, limits, TYPE.name)
    }

    /// Whether the device looks like it queues commands.
    pub fn hw_tag(&self) -> bool {
        self.hw_tag
    }

    /// The busy queues in service-tree order, as (task or 0 for async,
    /// class letter, level): what the next selections will follow.
    pub fn tree_order(&self) -> Vec<(u32, char, u8)> {
        self.tree
            .iter()
            .map(|&(.., id)| {
                let q = self.q(id);
                let c = match q.class {
                    Class::Rt => 'r',
                    Class::Be => 'b',
                    Class::Idle => 'i',
                };
                (q.owner.map_or(0, |t| t.0), c, q.level)
            })
            .collect()
    }

    fn q(&self, id: QueueId) -> &Queue {
        self.queues[id.0 as usize].as_ref().expect("live queue")
    }

    fn qm(&mut self, id: QueueId) -> &mut Queue {
        self.queues[id.0 as usize].as_mut().expect("live queue")
    }

    fn rq_in_driver(&self) -> u32 {
        self.rq_in_driver[0] + self.rq_in_driver[1]
    }

    /// `cfq_prio_slice`: base + base/5 × (4 − level).
    fn prio_slice(&self, sync: bool, level: u8) -> Duration {
        let base = self.slice[usize::from(sync)].nanos() as i64;
        let s = base + base / SLICE_SCALE * (4 - i64::from(level));
        Duration(s.max(1) as u64)
    }

    fn slice_used(&self, id: QueueId, now: Instant) -> bool {
        let q = self.q(id);
        !q.slice_new && now >= q.slice_end
    }

    // ----- the service tree -------------------------------------------------

    /// `cfq_service_tree_add`.
    fn service_tree_add(&mut self, id: QueueId, add_front: bool, now: Instant) {
        let now_ns = now.nanos() as i64;
        let key = {
            let q = self.q(id);
            if q.class == Class::Idle {
                let last = self.tree.iter().next_back().filter(|e| e.4 != id);
                IDLE_DELAY_NS + last.map_or(now_ns, |e| e.2)
            } else if !add_front {
                let offset = i64::from(self.busy_queues.saturating_sub(1))
                    * (self.prio_slice(true, 0).nanos() as i64
                        - self.prio_slice(q.sync, q.level).nanos() as i64);
                now_ns + offset - q.slice_resid
            } else {
                let first = self.tree.iter().next().filter(|e| e.4 != id);
                first.map_or(now_ns, |e| e.2) - PREEMPT_KEY_NS
            }
        };
        if !add_front {
            self.qm(id).slice_resid = 0;
        }
        if let Some(old) = self.q(id).tree {
            if old.2 == key {
                return;
            }
            self.tree.remove(&old);
        }
        self.seq += 1;
        let q = self.q(id);
        let level = if self.sort_level { q.level } else { 0 };
        let entry = (q.class, level, key, self.seq, id);
        self.tree.insert(entry);
        self.qm(id).tree = Some(entry);
    }

    /// `cfq_add_cfqq_rr`.
    fn add_rr(&mut self, id: QueueId, now: Instant) {
        debug_assert!(self.q(id).tree.is_none());
        self.busy_queues += 1;
        self.service_tree_add(id, false, now);
        self.reindex(id);
    }

    /// `cfq_del_cfqq_rr`: out of the service tree and the level index.
    fn del_rr(&mut self, id: QueueId) {
        if let Some(e) = self.qm(id).tree.take() {
            self.tree.remove(&e);
            self.busy_queues -= 1;
        }
        self.reindex(id);
    }

    /// Keep `id`'s entry in the level index in step with its next request
    /// (`cfq_prio_tree_add`): busy non-IDLE queues only.
    fn reindex(&mut self, id: QueueId) {
        let want = {
            let q = self.q(id);
            if q.tree.is_none() || q.class == Class::Idle {
                None
            } else {
                q.next_rq
                    .and_then(|r| q.sorted.get(r))
                    .map(|r| (q.level, r.sector))
            }
        };
        let old = self.q(id).prio_key;
        if old == want {
            return;
        }
        if let Some((level, sector)) = old {
            self.prio.remove(&(level, sector, id));
        }
        if let Some((level, sector)) = want {
            self.prio.insert((level, sector, id));
        }
        self.qm(id).prio_key = want;
    }

    // ----- close cooperators ------------------------------------------------

    /// `cfq_rq_close`: a request starting at `sector` is close to the head
    /// if within the mean seek distance of the task this slice serves (4
    /// MiB while that mean has too few samples).
    fn close_to_head(&self, sector: Sector) -> bool {
        let Some(task) = self.active_task else {
            return false;
        };
        let thr = self
            .tasks
            .get(&task)
            .filter(|t| t.seek_valid())
            .map_or(CLOSE_THR, |t| t.seek_mean);
        sector.abs_diff(self.last_position) <= thr
    }

    /// `cfqq_close`: the busy queue of `cur`'s level whose next request
    /// starts at the head; else the nearer of the nearest below and above
    /// the head if close, else the other if close.
    fn queue_close(&self, cur: QueueId) -> Option<QueueId> {
        let level = self.q(cur).level;
        let head = self.last_position;
        let above = self
            .prio
            .range((level, head, QueueId(0))..=(level, Sector::MAX, QueueId(u32::MAX)))
            .find(|e| e.2 != cur)
            .copied();
        if let Some((_, sector, id)) = above {
            if sector == head {
                return Some(id);
            }
        }
        let below = self
            .prio
            .range((level, 0, QueueId(0))..(level, head, QueueId(0)))
            .rev()
            .find(|e| e.2 != cur)
            .copied();
        let mut near: Vec<(Sector, QueueId)> = [below, above]
            .into_iter()
            .flatten()
            .map(|(_, sector, id)| (sector, id))
            .collect();
        near.sort_by_key(|&(sector, id)| (sector.abs_diff(head), id));
        near.into_iter()
            .find(|&(sector, _)| self.close_to_head(sector))
            .map(|(_, id)| id)
    }

    /// `cfq_close_cooperator` (2.6.32): a close queue that has made no
    /// cooperative jump since it was last chosen from the tree. Unless
    /// `probe`, it is marked as making one now.
    fn close_cooperator(&mut self, cur: QueueId, probe: bool) -> Option<QueueId> {
        self.active_task?;
        let c = self.queue_close(cur)?;
        if self.q(c).coop {
            return None;
        }
        if !probe {
            self.qm(c).coop = true;
        }
        Some(c)
    }

    // ----- queues -----------------------------------------------------------

    fn class_of(r: &Request) -> (Class, u8) {
        match r.prio.effective_class() {
            IoClass::RealTime => (Class::Rt, r.prio.level()),
            IoClass::Idle => (Class::Idle, IOPRIO_LEVELS - 1),
            _ => (Class::Be, r.prio.level()),
        }
    }

    fn queue_for(&mut self, r: &Request, sync: bool) -> QueueId {
        let (class, level) = Self::class_of(r);
        if sync {
            if let Some(&id) = self.sync_queues.get(&r.task) {
                // ionice while running: takes effect at the next resort.
                let q = self.qm(id);
                if (q.class, q.level) != (class, level) {
                    q.class = class;
                    q.level = level;
                    if class == Class::Idle {
                        q.idle_window = false;
                    }
                    self.reindex(id);
                }
                return id;
            }
            let id = self.alloc(Queue::new(true, class, level, Some(r.task)));
            self.sync_queues.insert(r.task, id);
            id
        } else {
            let level = cfq_common::async_level(r.prio, level);
            if let Some(&id) = self.async_queues.get(&(class, level)) {
                return id;
            }
            let id = self.alloc(Queue::new(false, class, level, None));
            self.async_queues.insert((class, level), id);
            id
        }
    }

    fn alloc(&mut self, q: Queue) -> QueueId {
        let free = self.free.pop().map(|id| id.0);
        QueueId(cfq_common::slab_insert(&mut self.queues, free, q))
    }

    /// Drop a sync queue whose task exited once nothing refers to it.
    fn maybe_free(&mut self, id: QueueId) {
        let Some(q) = self.queues[id.0 as usize].as_ref() else {
            return;
        };
        if q.sync
            && q.owner.is_none()
            && q.sorted.is_empty()
            && q.dispatched == 0
            && q.tree.is_none()
            && self.active != Some(id)
        {
            self.queues[id.0 as usize] = None;
            self.free.push(id);
        }
    }

    fn choose_req(
        &self,
        id: QueueId,
        a: Option<RequestId>,
        b: Option<RequestId>,
        last: Sector,
    ) -> Option<RequestId> {
        cfq_common::choose_req(&self.q(id).sorted, &self.back_seek, a, b, last)
    }

    fn find_next_rq(&self, id: QueueId, last: RequestId) -> Option<RequestId> {
        cfq_common::find_next_rq(&self.q(id).sorted, &self.back_seek, last)
    }

    // ----- arrival ----------------------------------------------------------

    /// `cfq_update_idle_window` (2.6.32).
    fn update_idle_window(&mut self, id: QueueId, task: TaskId) {
        let (slice_idle, low_latency, hw_tag) = (self.slice_idle, self.low_latency, self.hw_tag);
        let t = self.tasks.get(&task);
        let q = self.q(id);
        if !q.sync || q.class == Class::Idle {
            return;
        }
        let mut enable = q.idle_window;
        match t {
            None => enable = false,
            Some(_) if slice_idle == Duration::ZERO => enable = false,
            Some(t) if !low_latency && hw_tag && t.seeky() => enable = false,
            Some(t) if t.ttime.valid() => {
                let limit = if t.seek_valid() && t.seeky() {
                    MIN_TT
                } else {
                    slice_idle
                };
                enable = t.ttime.mean() <= limit.nanos();
            }
            Some(_) => {}
        }
        self.qm(id).idle_window = enable;
    }

    /// `cfq_should_preempt` (2.6.32).
    fn should_preempt(&self, new: QueueId, r: &Request, now: Instant) -> Preempt {
        let Some(a) = self.active else {
            return Preempt::No;
        };
        let (n, q) = (self.q(new), self.q(a));
        if self.slice_used(a, now) {
            return Preempt::Yes;
        }
        if n.class == Class::Idle {
            return Preempt::No;
        }
        if q.class == Class::Idle {
            return Preempt::Yes;
        }
        if is_sync(r) && !q.sync {
            return Preempt::Yes;
        }
        if r.meta && q.meta_pending == 0 {
            return Preempt::Yes;
        }
        if n.class == Class::Rt && q.class != Class::Rt {
            return Preempt::Yes;
        }
        if !q.wait_request || self.active_task.is_none() {
            return Preempt::No;
        }
        if self.close_to_head(r.sector) && (!n.coop || self.busy_queues == 1) {
            return Preempt::Close;
        }
        Preempt::No
    }

    /// `cfq_preempt_queue`: the active queue expires keeping its leftover;
    /// `id` goes to the front of the tree with a fresh slice.
    fn preempt_queue(&mut self, id: QueueId, now: Instant) {
        if let Some(a) = self.active {
            self.expire(a, true, now);
        }
        self.service_tree_add(id, true, now);
        let q = self.qm(id);
        q.slice_end = Instant::ZERO;
        q.slice_new = true;
    }

    // ----- idling and expiry ------------------------------------------------

    /// `cfq_arm_slice_timer` (2.6.32).
    fn arm_slice_timer(&mut self, id: QueueId, now: Instant) {
        if !self.rotational && self.hw_tag {
            return;
        }
        if self.rq_in_driver() > 0 {
            return;
        }
        let q = self.q(id);
        if self.slice_idle == Duration::ZERO || !q.idle_window {
            return;
        }
        let Some(t) = q.owner.and_then(|o| self.tasks.get(&o)) else {
            return;
        };
        if t.ttime.valid() && q.slice_end.nanos() < now.nanos().saturating_add(t.ttime.mean()) {
            return;
        }
        let mut sl = self.slice_idle;
        if t.seek_valid() && t.seeky() {
            sl = sl.min(MIN_TT);
        }
        self.qm(id).wait_request = true;
        self.idle_timer = Some(now + sl);
    }

    /// The idle timer fired (`cfq_idle_slice_timer`).
    fn fire_idle_timer(&mut self, now: Instant) {
        let Some(t) = self.idle_timer else { return };
        if now < t {
            return;
        }
        self.idle_timer = None;
        let Some(a) = self.active else { return };
        if self.q(a).must_dispatch {
            return;
        }
        if self.slice_used(a, now) || (self.busy_queues > 0 && self.q(a).sorted.is_empty()) {
            self.expire(a, false, now);
        }
    }

    /// `__cfq_slice_expired`.
    fn expire(&mut self, id: QueueId, timed_out: bool, now: Instant) {
        self.idle_timer = None;
        let q = self.qm(id);
        q.wait_request = false;
        if timed_out && !q.slice_new {
            q.slice_resid = q.slice_end.nanos() as i64 - now.nanos() as i64;
        }
        if q.tree.is_some() {
            self.service_tree_add(id, false, now);
        }
        self.active = None;
        self.active_task = None;
        self.maybe_free(id);
    }

    /// `cfq_set_active_queue`: a queue chosen from the tree loses its
    /// `coop` mark unless a preemption gave it; `coop_preempt` is spent.
    fn set_active(&mut self, id: QueueId, from_tree: bool) {
        self.idle_timer = None;
        let q = self.qm(id);
        if from_tree && !q.coop_preempt {
            q.coop = false;
        }
        q.coop_preempt = false;
        q.slice_end = Instant::ZERO;
        q.slice_dispatch = 0;
        q.fifo_checked = false;
        q.slice_new = true;
        q.must_alloc_slice = false;
        q.wait_request = false;
        q.must_dispatch = false;
        self.active = Some(id);
    }

    /// `cfq_select_queue` (2.6.32).
    fn select_queue(&mut self, now: Instant) -> Option<QueueId> {
        if let Some(a) = self.active {
            if !self.slice_used(a, now) || self.q(a).must_dispatch {
                if !self.q(a).sorted.is_empty() {
                    return Some(a);
                }
                // A queue with a request near the head runs instead.
                if let Some(c) = self.close_cooperator(a, false) {
                    self.expire(a, false, now);
                    self.set_active(c, false);
                    return Some(c);
                }
                let q = self.q(a);
                if self.idle_timer.is_some() || (q.dispatched > 0 && q.idle_window) {
                    return None;
                }
            }
            self.expire(a, false, now);
        }
        let &(.., id) = self.tree.iter().next()?;
        self.set_active(id, true);
        Some(id)
    }

    /// `cfq_may_dispatch` (2.6.32).
    fn may_dispatch(&self, id: QueueId, now: Instant) -> bool {
        let q = self.q(id);
        if q.idle_window && self.rq_in_driver[0] > 0 {
            return false;
        }
        if self.sync_flight > 0 && !q.sync {
            return false;
        }
        let mut max = if q.class == Class::Idle {
            1
        } else {
            self.quantum
        };
        if q.dispatched >= max {
            if q.class == Class::Idle || self.busy_queues > 1 {
                return false;
            }
            max *= 4;
        }
        if !q.sync && self.low_latency {
            let since = now.since(self.last_end_sync_rq).nanos();
            let mut depth = (since / self.slice[1].nanos().max(1)) as u32;
            if depth == 0 && q.dispatched == 0 {
                depth = 1;
            }
            max = max.min(depth);
        }
        q.dispatched < max
    }

    /// `cfq_update_hw_tag` (2.6.32): not sticky, decided every 50 samples.
    fn update_hw_tag(&mut self) {
        let in_driver = self.rq_in_driver();
        self.rq_in_driver_peak = self.rq_in_driver_peak.max(in_driver);
        if self.rq_queued <= HW_QUEUE_MIN as usize && in_driver <= HW_QUEUE_MIN {
            return;
        }
        self.hw_tag_samples += 1;
        if self.hw_tag_samples < HW_TAG_SAMPLES {
            return;
        }
        self.hw_tag = self.rq_in_driver_peak >= HW_QUEUE_MIN;
        self.hw_tag_samples = 0;
        self.rq_in_driver_peak = 0;
    }

    fn hold(&self) -> Dispatch {
        if self.rq_queued == 0 {
            return Dispatch::Empty;
        }
        if let Some(t) = self.idle_timer {
            return Dispatch::Wait { until: t };
        }
        debug_assert!(self.rq_in_driver() > 0, "holding with nothing in flight");
        Dispatch::Wait {
            until: Instant::NEVER,
        }
    }

    fn take(&mut self, id: QueueId, rid: RequestId) -> Request {
        let next = self.find_next_rq(id, rid);
        let q = self.qm(id);
        q.next_rq = next;
        q.fifo.remove(rid);
        let request = q.sorted.remove(rid).expect("queued");
        if request.meta {
            q.meta_pending -= 1;
        }
        q.dispatched += 1;
        let qsync = q.sync;
        self.rq_queued -= 1;
        self.rq_in_driver[usize::from(is_sync(&request))] += 1;
        if qsync {
            self.sync_flight += 1;
        }
        self.last_position = request.end();
        self.in_flight.insert(request.id, id);
        self.update_hw_tag();
        if self.q(id).sorted.is_empty() {
            self.del_rr(id);
        } else {
            self.reindex(id);
        }
        request
    }
}

impl Scheduler for Cfq2632 {
    fn name(&self) -> &'static str {
        self.name
    }

    fn insert(&mut self, request: Request, now: Instant) {
        self.fire_idle_timer(now);
        let sync = is_sync(&request);
        let id = self.queue_for(&request, sync);
        let rule = self.rule;
        let last_position = self.last_position;
        match self.qm(id).sorted.merge(request, &rule) {
            MergeOutcome::None(request) => {
                let deadline = now + self.fifo_expire[usize::from(sync)];
                let (rid, task, sector, end, meta) = (
                    request.id,
                    request.task,
                    request.sector,
                    request.end(),
                    request.meta,
                );
                let q = self.qm(id);
                let info = cfq_common::enqueue(&mut q.sorted, &mut q.fifo, request, deadline);
                if meta {
                    q.meta_pending += 1;
                }
                self.rq_queued += 1;
                if self.q(id).tree.is_none() {
                    self.add_rr(id, now);
                }
                let prev = self.q(id).next_rq;
                let next = self.choose_req(id, prev, Some(rid), last_position);
                self.qm(id).next_rq = next;
                // cfq_rq_enqueued: think time, seek distance, idle window.
                let limit = self.slice_idle.nanos().saturating_mul(2);
                let t = self
                    .tasks
                    .entry(task)
                    .or_insert_with(|| TaskState::new(now));
                t.ttime
                    .add(now.since(t.last_end_request).nanos().min(limit));
                t.add_seek(sector);
                self.update_idle_window(id, task);
                if let Some(t) = self.tasks.get_mut(&task) {
                    t.last_request_pos = end;
                }
                if self.active == Some(id) {
                    // The idle wait ends (for a single small request the
                    // kernel kept the timer for merges until the issuer
                    // unplugged, at once for a waiting reader: module notes).
                    if self.q(id).wait_request {
                        self.qm(id).must_dispatch = true;
                    }
                    self.idle_timer = None;
                } else {
                    match self.should_preempt(id, &info, now) {
                        Preempt::No => {}
                        Preempt::Yes => self.preempt_queue(id, now),
                        Preempt::Close => {
                            let q = self.qm(id);
                            q.coop = true;
                            q.coop_preempt = true;
                            self.preempt_queue(id, now);
                        }
                    }
                }
                self.reindex(id);
            }
            MergeOutcome::Merged {
                survivor,
                absorbed_queued,
            } => {
                if let Some(gone) = absorbed_queued {
                    let q = self.qm(id);
                    q.fifo.absorb(gone, survivor, &mut q.next_rq);
                    self.rq_queued -= 1;
                }
                let meta = self.q(id).sorted.iter().filter(|r| r.meta).count() as u32;
                self.qm(id).meta_pending = meta;
                let prev = self.q(id).next_rq;
                let next = self.choose_req(id, prev, Some(survivor), last_position);
                self.qm(id).next_rq = next;
                self.reindex(id);
            }
        }
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        self.fire_idle_timer(now);
        if self.rq_queued == 0 {
            return Dispatch::Empty;
        }
        let Some(id) = self.select_queue(now) else {
            return self.hold();
        };
        if !self.may_dispatch(id, now) {
            return self.hold();
        }
        let fifo_rq = {
            let q = self.qm(id);
            q.fifo.expired_once(&mut q.fifo_checked, now)
        };
        let rid = fifo_rq
            .or(self.q(id).next_rq)
            .expect("a selected queue has requests");
        let request = self.take(id, rid);
        if self.active_task.is_none() {
            self.active_task = Some(request.task);
        }
        let async_rq = self.slice_async_rq;
        let busy_others = self.busy_queues > 1;
        let q = self.qm(id);
        q.slice_dispatch += 1;
        q.must_dispatch = false;
        // `cfq_prio_to_maxrq`: 2 × (base + base × (7 − level)).
        let maxrq = 2 * (async_rq + async_rq * u32::from(IOPRIO_LEVELS - 1 - q.level));
        let expire = (!q.sync && q.slice_dispatch >= maxrq) || q.class == Class::Idle;
        if busy_others && expire {
            q.slice_end = now + JIFFY;
            q.slice_new = false;
            self.expire(id, false, now);
        }
        Dispatch::Request(request)
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        self.fire_idle_timer(now);
        let Some(id) = self.in_flight.remove(&request.id) else {
            debug_assert!(false, "completion of a request cfq-2.6.32 did not dispatch");
            return;
        };
        self.update_hw_tag();
        let sync = is_sync(request);
        self.rq_in_driver[usize::from(sync)] -= 1;
        let q = self.qm(id);
        q.dispatched -= 1;
        if q.sync {
            self.sync_flight -= 1;
        }
        if sync {
            if let Some(t) = self.tasks.get_mut(&request.task) {
                t.last_end_request = now;
            }
            self.last_end_sync_rq = now;
        }
        if self.active == Some(id) {
            if self.q(id).slice_new {
                let slice = self.prio_slice(self.q(id).sync, self.q(id).level);
                let q = self.qm(id);
                q.slice_end = now + slice;
                q.slice_new = false;
            }
            let q = self.q(id);
            if self.slice_used(id, now) || q.class == Class::Idle {
                self.expire(id, true, now);
            } else if q.sorted.is_empty()
                && self.close_cooperator(id, true).is_none()
                && sync
                && !request.noidle
            {
                self.arm_slice_timer(id, now);
            }
        }
        self.maybe_free(id);
    }

    fn queued(&self) -> usize {
        self.rq_queued
    }

    /// `cfq_may_queue` (2.6.32): MUST, once per slice, for the task whose
    /// queue CFQ is idling on, so the request it is waiting for gets past a
    /// full request list. (The `cfq_prio_boost` of tasks holding
    /// filesystem locks is not modelled.)
    fn may_queue(&mut self, request: &Request, _now: Instant) -> MayQueue {
        let Some(&id) = is_sync(request)
            .then(|| self.sync_queues.get(&request.task))
            .flatten()
        else {
            return MayQueue::May;
        };
        let waiting = self.active == Some(id) && self.q(id).wait_request;
        let q = self.qm(id);
        if waiting && !q.must_alloc_slice {
            q.must_alloc_slice = true;
            return MayQueue::Must;
        }
        MayQueue::May
    }

    fn task_exited(&mut self, task: TaskId, now: Instant) {
        self.fire_idle_timer(now);
        self.tasks.remove(&task);
        if let Some(id) = self.sync_queues.remove(&task) {
            self.qm(id).owner = None;
            if self.active == Some(id) {
                self.expire(id, false, now);
            }
            self.maybe_free(id);
        }
    }

    fn starvation_bound(&self, _service: Duration, _max_queued: usize) -> Option<Duration> {
        None
    }

    /// The module's invariants: the tree holds exactly the busy queues,
    /// each with requests queued; the counts match the queues.
    fn check_invariants(&self) -> Result<(), String> {
        let (mut queued, mut busy, mut dispatched, mut sync_dispatched) = (0, 0, 0, 0);
        for (i, q) in self.queues.iter().enumerate() {
            let Some(q) = q else { continue };
            queued += q.sorted.len();
            dispatched += q.dispatched;
            if q.sync {
                sync_dispatched += q.dispatched;
            }
            if let Some(e) = q.tree {
                busy += 1;
                if e.4 != QueueId(i as u32) || !self.tree.contains(&e) {
                    return Err(format!("queue {i} is not in the tree at {e:?}"));
                }
                if q.sorted.is_empty() {
                    return Err(format!("busy queue {i} has no request"));
                }
            } else if !q.sorted.is_empty() {
                return Err(format!("queue {i} has requests but is not in the tree"));
            }
        }
        if busy != self.busy_queues as usize || busy != self.tree.len() {
            return Err(format!(
                "busy_queues {} and {} tree entries, but {busy} queues are busy",
                self.busy_queues,
                self.tree.len()
            ));
        }
        if queued != self.rq_queued {
            return Err(format!("rq_queued {} but {queued} queued", self.rq_queued));
        }
        let in_driver = self.rq_in_driver();
        if dispatched != in_driver || in_driver as usize != self.in_flight.len() {
            return Err(format!(
                "rq_in_driver {in_driver}, queues' dispatched {dispatched}, in flight {}",
                self.in_flight.len()
            ));
        }
        let indexed = self.prio.len();
        let busy_indexed = self
            .queues
            .iter()
            .flatten()
            .filter(|q| q.tree.is_some() && q.class != Class::Idle)
            .count();
        if indexed != busy_indexed {
            return Err(format!(
                "{indexed} queues in the level index, {busy_indexed} busy non-IDLE queues"
            ));
        }
        for &(level, sector, id) in &self.prio {
            let q = self.queues[id.0 as usize]
                .as_ref()
                .ok_or_else(|| format!("level index names freed queue {}", id.0))?;
            let at = q.next_rq.and_then(|r| q.sorted.get(r)).map(|r| r.sector);
            if q.level != level || at != Some(sector) || q.prio_key != Some((level, sector)) {
                return Err(format!(
                    "queue {} indexed at ({level}, {sector}), next request at {at:?}",
                    id.0
                ));
            }
        }
        if sync_dispatched != self.sync_flight {
            return Err(format!(
                "sync_flight {} but sync queues have {sync_dispatched} in the driver",
                self.sync_flight
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
