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
/// FIFO deadline of sync requests, HZ/8 (`cfq_fifo_expire[1]`, v2.6.32).
pub const FIFO_EXPIRE_SYNC_MS: i64 = 125;
/// FIFO deadline of async requests, HZ/4 (`cfq_fifo_expire[0]`, v2.6.32).
pub const FIFO_EXPIRE_ASYNC_MS: i64 = 250;
/// Longest backward seek taken, 16 MiB (`cfq_back_max`, v2.6.32).
pub const BACK_SEEK_MAX_KIB: i64 = 16 * 1024;
/// A backward seek counts twice its distance (`cfq_back_penalty`, v2.6.32).
pub const BACK_SEEK_PENALTY: i64 = 2;
/// Base sync slice, HZ/10 (`cfq_slice_sync`, v2.6.32).
pub const SLICE_SYNC_MS: i64 = 100;
/// Base async slice, HZ/25 (`cfq_slice_async`, v2.6.32).
pub const SLICE_ASYNC_MS: i64 = 40;
/// Base async request budget (`cfq_slice_async_rq`, v2.6.32).
pub const SLICE_ASYNC_RQ: i64 = 2;
/// Idle wait for a sync queue's next request, HZ/125 (`cfq_slice_idle`).
pub const SLICE_IDLE_MS: i64 = 8;
/// Async depth ramp after sync completions, new in 2.6.32 (`cfq_latency`,
/// commits 1d22351, 963b72f).
pub const LOW_LATENCY: i64 = 1;
/// Brunelle's ordering off: 2.6.32 as released compared only the class.
pub const SORT_LEVEL: i64 = 0;

/// One jiffy at HZ = 1000.
const JIFFY: Duration = Duration::from_millis(1);
/// A preempting queue's key is the first key minus HZ.
const PREEMPT_KEY_NS: i64 = 1_000_000_000;
/// An IDLE queue's key is the last key plus HZ/5 (`CFQ_IDLE_DELAY`).
const IDLE_DELAY_NS: i64 = 200_000_000;
/// Idle wait of a seeky task, 2 ms (`CFQ_MIN_TT`, read as ms in
/// `cfq_arm_slice_timer`).
const MIN_TT: Duration = Duration::from_millis(2);
/// Slice step per level is base / 5 (`CFQ_SLICE_SCALE`).
const SLICE_SCALE: i64 = 5;
/// Depth that means command queueing (`CFQ_HW_QUEUE_MIN`).
const HW_QUEUE_MIN: u32 = 5;
/// Samples between `hw_tag` decisions (`cfq_update_hw_tag`, v2.6.32).
const HW_TAG_SAMPLES: u32 = 50;
/// Seeky: mean seek distance above 8192 sectors (`CIC_SEEKY`, v2.6.32).
const SEEKY_MEAN: u64 = 8 * 1024;
/// A request this close to the head is "close" while the active task's
/// mean seek distance has too few samples (`CIC_SEEK_THR`, 4 MiB).
const CLOSE_THR: Sector = 8 * 1024;

/// The tunables both registered names share.
const fn tunables() -> [Tunable; 10] {
    [
        Tunable {
            name: "quantum",
            default: QUANTUM,
            unit: "requests",
            about: "requests a queue may have in the driver while others are busy",
        },
        Tunable {
            name: "fifo_expire_sync",
            default: FIFO_EXPIRE_SYNC_MS,
            unit: "ms",
            about: "FIFO deadline of sync requests within their queue",
        },
        Tunable {
            name: "fifo_expire_async",
            default: FIFO_EXPIRE_ASYNC_MS,
            unit: "ms",
            about: "FIFO deadline of async requests within their queue",
        },
        Tunable {
            name: "back_seek_max",
            default: BACK_SEEK_MAX_KIB,
            unit: "KiB",
            about: "longest backward seek taken instead of wrapping",
        },
        Tunable {
            name: "back_seek_penalty",
            default: BACK_SEEK_PENALTY,
            unit: "factor",
            about: "cost of a backward seek relative to a forward one",
        },
        Tunable {
            name: "slice_sync",
            default: SLICE_SYNC_MS,
            unit: "ms",
            about: "base time slice of a sync queue (level 4)",
        },
        Tunable {
            name: "slice_async",
            default: SLICE_ASYNC_MS,
            unit: "ms",
            about: "base time slice of an async queue (level 4)",
        },
        Tunable {
            name: "slice_async_rq",
            default: SLICE_ASYNC_RQ,
            unit: "requests",
            about: "base request budget of an async slice",
        },
        Tunable {
            name: "slice_idle",
            default: SLICE_IDLE_MS,
            unit: "ms",
            about: "idle wait for a sync queue's next request (0: never idle)",
        },
        Tunable {
            name: "low_latency",
            default: LOW_LATENCY,
            unit: "bool",
            about: "ramp async depth up with the time since the last sync completion",
        },
    ]
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
    /// (deadline, id), earliest first.
    fifo: BTreeSet<(Instant, RequestId)>,
    fifo_time: FxHashMap<RequestId, Instant>,
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
            fifo: BTreeSet::new(),
            fifo_time: FxHashMap::default(),
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
        let ms = |name: &str| Duration::from_millis(t.get(name) as u64);
        Cfq2632 {
            name,
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
            sort_level: t.get("sort_level") != 0,
            rotational: limits.rotational,
            rule: MergeRule {
                max_sectors: limits.max_sectors,
                front_merges: true,
                same_task: false,
            },
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
            // Class NONE shares the level-4 async queue (IOPRIO_NORM).
            let level = if r.prio.class() == IoClass::None {
                4
            } else {
                level
            };
            if let Some(&id) = self.async_queues.get(&(class, level)) {
                return id;
            }
            let id = self.alloc(Queue::new(false, class, level, None));
            self.async_queues.insert((class, level), id);
            id
        }
    }

    fn alloc(&mut self, q: Queue) -> QueueId {
        match self.free.pop() {
            Some(id) => {
                self.queues[id.0 as usize] = Some(q);
                id
            }
            None => {
                self.queues.push(Some(q));
                QueueId(self.queues.len() as u32 - 1)
            }
        }
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
        let (x, y) = match (a, b) {
            (None, b) => return b,
            (a, None) => return a,
            (Some(x), Some(y)) if x == y => return b,
            (Some(x), Some(y)) => (x, y),
        };
        let sorted = &self.q(id).sorted;
        let (r1, r2) = (
            sorted.get(x).expect("queued"),
            sorted.get(y).expect("queued"),
        );
        Some(if self.back_seek.prefers(r1, r2, last) {
            x
        } else {
            y
        })
    }

    fn find_next_rq(&self, id: QueueId, last: RequestId) -> Option<RequestId> {
        let sorted = &self.q(id).sorted;
        let next = sorted
            .next_after(last)
            .or_else(|| sorted.first().filter(|&f| f != last));
        let prev = sorted.prev_before(last);
        let pos = sorted.get(last).expect("queued").sector;
        self.choose_req(id, next, prev, pos)
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
        let t = q
            .fifo_time
            .remove(&rid)
            .expect("queued request has a deadline");
        q.fifo.remove(&(t, rid));
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
                let info = Request {
                    merged: Vec::new(),
                    ..request.clone()
                };
                let q = self.qm(id);
                q.fifo.insert((deadline, rid));
                q.fifo_time.insert(rid, deadline);
                q.sorted.insert(request);
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
                    let gone_time = q.fifo_time.remove(&gone).expect("queued");
                    q.fifo.remove(&(gone_time, gone));
                    let mine = q.fifo_time[&survivor];
                    if gone_time < mine {
                        q.fifo.remove(&(mine, survivor));
                        q.fifo.insert((gone_time, survivor));
                        q.fifo_time.insert(survivor, gone_time);
                    }
                    if q.next_rq == Some(gone) {
                        q.next_rq = Some(survivor);
                    }
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
            if q.fifo_checked {
                None
            } else {
                q.fifo_checked = true;
                q.fifo
                    .iter()
                    .next()
                    .filter(|&&(deadline, _)| now >= deadline)
                    .map(|&(_, rid)| rid)
            }
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
mod tests {
    use super::*;
    use elevator_core::IoPrio;

    use crate::harness::{Case, Layout, Options, Phase, Run, TaskScript, REGION};

    fn read(id: u64, task: u32, sector: Sector, prio: IoPrio) -> Request {
        Request {
            prio,
            ..Request::read(id, task, sector, 8)
        }
    }

    fn build(ty: &SchedulerType, limits: &QueueLimits) -> Cfq2632 {
        let t = ty.tunables(std::iter::empty()).expect("defaults");
        Cfq2632::from_tunables(&t, limits, ty.name)
    }

    /// Four queues become busy at once, the lowest BE level first.
    fn order_after_arrivals(ty: &SchedulerType) -> Vec<(u32, char, u8)> {
        let mut s = build(ty, &QueueLimits::default());
        let arrivals = [
            (1, IoPrio::be(7)),
            (2, IoPrio::idle()),
            (3, IoPrio::be(0)),
            (4, IoPrio::rt(7)),
        ];
        for (k, &(task, prio)) in arrivals.iter().enumerate() {
            s.insert(
                read(k as u64, task, 1_000_000 * k as u64, prio),
                Instant::ZERO,
            );
        }
        s.tree_order()
    }

    #[test]
    fn the_class_only_sort_and_brunelles_sort_order_the_same_queues_differently() {
        // 2.6.32: RT first, IDLE last, BE by key. BE7 arrived first with
        // key now; BE0's offset is (busy − 1) × (180 − 180) ms = 0, so it
        // sorts after BE7 on the tie.
        let released = order_after_arrivals(&TYPE);
        assert_eq!(
            released,
            vec![(4, 'r', 7), (1, 'b', 7), (3, 'b', 0), (2, 'i', 7)]
        );
        // Brunelle: class, then level, then key.
        let patched = order_after_arrivals(&TYPE_BRUNELLE);
        assert_eq!(
            patched,
            vec![(4, 'r', 7), (3, 'b', 0), (1, 'b', 7), (2, 'i', 7)]
        );
    }

    /// A reader keeping 40 requests in the system, 1000 sectors apart, on
    /// a driver that holds up to `depth` of them and completes one a
    /// millisecond (the harness's serial device), until all its 240
    /// requests completed (at 240 ms: the driver never runs dry before).
    /// The run stops right after that last completion.
    fn hw_tag_after(depth: u32, rotational: bool) -> Run<Cfq2632> {
        let limits = QueueLimits {
            queue_depth: depth,
            rotational,
            ..QueueLimits::default()
        };
        let reads = Phase::reads(240, 8, Layout::Strided { stride: 1_000 });
        let reader = TaskScript {
            outstanding: 40,
            ..TaskScript::new(1, REGION, vec![reads])
        };
        let case = Case::serial(vec![reader], limits, Duration::from_millis(1));
        let mut run = Run::new(Box::new(Cfq2632::new(&limits)), &case, &Options::default());
        let last = Instant(240 * 1_000_000);
        run.run_until(last).unwrap_or_else(|v| panic!("{v}"));
        assert_eq!(run.stats(TaskId(1)).requests(), 240);
        assert_eq!(run.now(), last);
        run
    }

    #[test]
    fn hw_tag_follows_the_depth_the_driver_reaches() {
        let tagged = hw_tag_after(31, true).policy().hw_tag();
        assert!(tagged, "NCQ 31: the driver holds up to 16 (4 × quantum)");
        let tagged = hw_tag_after(1, true).policy().hw_tag();
        assert!(!tagged, "no queueing: the depth seen is 1");
    }

    #[test]
    fn hw_tag_decides_idling_on_a_non_rotational_device() {
        // On flash with queueing CFQ never idles; at depth 1 (PATA, MMC)
        // hw_tag goes off and it idles as on a disk. Right after the
        // reader's last request completed alone, another task's read comes.
        for (depth, idles) in [(31, false), (1, true)] {
            let mut run = hw_tag_after(depth, false);
            let t = run.now();
            let s = run.policy_mut();
            s.insert(read(10_000, 2, 900_000_000, IoPrio::be(4)), t);
            let waited =
                matches!(s.dispatch(t), Dispatch::Wait { until } if until != Instant::NEVER);
            assert_eq!(waited, idles, "depth {depth}");
        }
    }

    #[test]
    fn a_direct_write_idles_and_an_fsync_write_does_not() {
        for (write, idles) in [
            (Request::write_direct(1, 1, 1000, 8), true),
            (Request::write_sync(1, 1, 1000, 8), false),
        ] {
            let mut s = Cfq2632::new(&QueueLimits::default());
            s.insert(write, Instant::ZERO);
            let Dispatch::Request(w) = s.dispatch(Instant::ZERO) else {
                panic!("the write goes out")
            };
            s.insert(read(2, 2, 900_000, IoPrio::be(4)), Instant(1_000_000));
            s.complete(&w, Instant(5_000_000));
            let d = s.dispatch(Instant(5_000_000));
            assert_eq!(
                matches!(d, Dispatch::Wait { .. }),
                idles,
                "noidle {}: {d:?}",
                w.noidle
            );
        }
    }

    #[test]
    fn must_queue_is_answered_once_per_slice_for_the_idling_queue() {
        let mut s = Cfq2632::new(&QueueLimits::default());
        let r = |id| read(id, 1, 1000 + id * 8, IoPrio::be(4));
        s.insert(r(1), Instant::ZERO);
        let Dispatch::Request(d) = s.dispatch(Instant::ZERO) else {
            panic!("dispatched")
        };
        let other = read(9, 2, 900_000, IoPrio::be(4));
        assert_eq!(
            s.may_queue(&r(2), Instant::ZERO),
            MayQueue::May,
            "not idling yet"
        );
        s.complete(&d, Instant(1_000_000));
        assert!(matches!(
            s.dispatch(Instant(1_000_000)),
            Dispatch::Empty | Dispatch::Wait { .. }
        ));
        assert_eq!(
            s.may_queue(&other, Instant(1_000_000)),
            MayQueue::May,
            "not its queue"
        );
        assert_eq!(
            s.may_queue(&r(2), Instant(1_000_000)),
            MayQueue::Must,
            "idling on it"
        );
        assert_eq!(
            s.may_queue(&r(2), Instant(1_000_000)),
            MayQueue::May,
            "once per slice"
        );
    }

    /// Task 1 reads `n` requests back to back, each completing 1 ms after
    /// its dispatch, its next coming at once; sectors from `sector(i)`.
    /// Returns the time after the last completion.
    fn serve(
        s: &mut Cfq2632,
        n: u64,
        prio: IoPrio,
        sector: impl Fn(u64) -> Sector,
        start: Instant,
    ) -> Instant {
        let mut now = start;
        for i in 0..n {
            s.insert(read(i, 1, sector(i), prio), now);
            let Dispatch::Request(d) = s.dispatch(now) else {
                panic!("task 1's read {i} goes out")
            };
            now += Duration::from_millis(1);
            s.complete(&d, now);
        }
        now
    }

    #[test]
    fn wait_request_lasts_the_slice_so_must_queue_comes_after_the_awaited_request() {
        // 2.6.32 sets wait_request when the queue idles and clears it only
        // when the slice ends: the awaited request coming does not end it,
        // and the once-per-slice `Must` is still there for a later request.
        let mut s = Cfq2632::new(&QueueLimits::default());
        let now = serve(&mut s, 3, IoPrio::be(4), |i| 1000 + 8 * i, Instant::ZERO);
        // Idling on task 1 now; its next read comes and goes out.
        let next = read(10, 1, 1024, IoPrio::be(4));
        s.insert(next, now);
        assert!(matches!(s.dispatch(now), Dispatch::Request(_)));
        assert_eq!(
            s.may_queue(&read(11, 1, 1032, IoPrio::be(4)), now),
            MayQueue::Must
        );
    }

    #[test]
    fn a_seeky_tasks_whole_mean_seek_distance_counts_as_close() {
        // Task 1 alternates between sectors 2M apart: its mean seek distance
        // is about 2M sectors. While CFQ idles on it, task 2's request 100k
        // sectors (50 MB) from where task 1 left the head is "close" by
        // 2.6.32's cfq_rq_close (the mean, uncapped) and preempts; capped
        // at 4 MiB (8192 sectors), as this model had it, it is not.
        let mut s = Cfq2632::new(&QueueLimits::default());
        let start = Instant::ZERO;
        let now = serve(
            &mut s,
            12,
            IoPrio::be(4),
            |i| (i % 2) * 2_000_000 + 1000,
            start,
        );
        let mean = s.tasks[&TaskId(1)].seek_mean;
        assert!(mean > 1_000_000, "task 1's mean seek {mean}");
        let near = s.last_position + 100_000;
        s.insert(read(100, 2, near, IoPrio::be(4)), now);
        let Dispatch::Request(d) = s.dispatch(now) else {
            panic!("task 2 preempted the idle wait")
        };
        assert_eq!(d.task, TaskId(2));
        // A request past the mean is not close: task 3 waits its turn.
        let mut s = Cfq2632::new(&QueueLimits::default());
        let now = serve(
            &mut s,
            12,
            IoPrio::be(4),
            |i| (i % 2) * 2_000_000 + 1000,
            start,
        );
        let far = s.last_position + 50_000_000;
        s.insert(read(100, 3, far, IoPrio::be(4)), now);
        assert!(
            matches!(s.dispatch(now), Dispatch::Wait { .. }),
            "CFQ keeps idling on task 1"
        );
    }

    #[test]
    fn a_request_for_the_waiting_queue_is_dispatched_though_the_slice_ran_out() {
        // BE7 gets 40 ms from its first completion (at 1 ms). Task 2 queues
        // at 20 ms; task 1 idles after its read completing at 40 ms; its
        // next read comes at 41.5 ms, past the slice's end, while the idle
        // timer still runs: `must_dispatch` lets it go out before the
        // slice expires (2.6.32 cfq_select_queue).
        let prio = IoPrio::be(7);
        let mut s = Cfq2632::new(&QueueLimits::default());
        let now = serve(&mut s, 20, prio, |i| 1000 + 8 * i, Instant::ZERO);
        s.insert(read(200, 2, 900_000_000, prio), now);
        let now = serve(&mut s, 20, prio, |i| 2000 + 8 * i, now);
        assert_eq!(now, Instant(40_000_000));
        let late = Instant(41_500_000);
        s.insert(read(300, 1, 3000, prio), late);
        let Dispatch::Request(d) = s.dispatch(late) else {
            panic!("a request goes out")
        };
        assert_eq!(d.task, TaskId(1), "task 1's awaited read, not task 2's");
    }

    /// Two BE4 readers at depth 1 on a disk serving each request in 1
    /// ms, each thinking 0.1 ms between a completion and its next request:
    /// task 1 reads at random in a 512 MiB span, task 2 sequentially from
    /// `seq_base`; run until `until_ms`.
    fn seeky_and_sequential(seq_base: Sector, until_ms: u64) -> Run<Cfq2632> {
        let limits = QueueLimits::default();
        let span = 1 << 20;
        let think = |p: Phase| Phase {
            min_think: Duration::from_micros(100),
            max_think: Duration::from_micros(100),
            ..p
        };
        let random = TaskScript {
            base: Some(REGION),
            ..TaskScript::new(
                1,
                REGION,
                vec![think(Phase::reads(100_000, 8, Layout::Random { span }))],
            )
        };
        let seq = TaskScript {
            base: Some(seq_base),
            ..TaskScript::new(
                2,
                seq_base,
                vec![think(Phase::reads(100_000, 256, Layout::Sequential))],
            )
        };
        let case = Case::serial(vec![random, seq], limits, Duration::from_millis(1));
        let mut run = Run::new(Box::new(Cfq2632::new(&limits)), &case, &Options::default());
        run.run_until(Instant(until_ms * 1_000_000))
            .unwrap_or_else(|v| panic!("{v}"));
        run
    }

    /// Requests per task served in `[from, to)` ms.
    fn served(run: &Run<Cfq2632>, task: u32, from: u64, to: u64) -> usize {
        run.stats(TaskId(task))
            .served
            .iter()
            .filter(|s| (from * 1_000_000..to * 1_000_000).contains(&s.dispatched.nanos()))
            .count()
    }

    #[test]
    fn a_seeky_reader_hands_the_disk_to_a_queue_within_its_seek_distance() {
        // The sequential reader starts inside the random reader's span, so
        // its next request is always within the random task's mean seek
        // distance (a third of the span): 2.6.32 takes it as a close
        // cooperator whenever the random queue runs dry, unless it made a
        // cooperative jump since it was last chosen from the tree. The
        // random reader then gets a whole slice only every other round.
        let near = seeky_and_sequential(REGION + (1 << 19), 3_000);
        // Far away (about 48 GiB off), nothing is close: plain round
        // robin, a 100 ms slice each.
        let far = seeky_and_sequential(REGION + 100_000_000, 3_000);
        let (rn, sn) = (
            served(&near, 1, 1_000, 3_000),
            served(&near, 2, 1_000, 3_000),
        );
        let (rf, sf) = (served(&far, 1, 1_000, 3_000), served(&far, 2, 1_000, 3_000));
        println!("near: random {rn} sequential {sn}; far: random {rf} sequential {sf}");
        // The serial disk serves each request in about a millisecond, so
        // the random reader's share is its share of the requests.
        let share = |r: usize, s: usize| r as f64 / (r + s) as f64;
        assert!((0.45..=0.55).contains(&share(rf, sf)), "far: {rf} vs {sf}");
        assert!(share(rn, sn) < 0.4, "near: {rn} vs {sn}");
    }

    #[test]
    fn the_close_test_uses_the_whole_mean_seek_distance() {
        // 2.6.32's cfq_rq_close: within the active task's seek_mean, not
        // capped at CIC_SEEK_THR once the mean has samples.
        let mut s = Cfq2632::new(&QueueLimits::default());
        s.active_task = Some(TaskId(1));
        let mut t = TaskState::new(Instant::ZERO);
        for k in 0..20u64 {
            let sector = 8 + (k % 2) * 1_000_000;
            t.add_seek(sector);
            t.last_request_pos = sector;
        }
        assert!(t.seek_valid() && t.seek_mean > 500_000, "{}", t.seek_mean);
        s.tasks.insert(TaskId(1), t);
        s.last_position = 0;
        assert!(s.close_to_head(400_000), "within the mean");
        assert!(!s.close_to_head(2_000_000), "beyond it");
        s.tasks.get_mut(&TaskId(1)).unwrap().seek_samples = 0;
        assert!(!s.close_to_head(400_000), "too few samples: 4 MiB");
        assert!(s.close_to_head(CLOSE_THR));
    }

    #[test]
    fn slices_follow_the_2632_table() {
        let s = Cfq2632::new(&QueueLimits::default());
        let ms = |sync, level| s.prio_slice(sync, level).nanos() / 1_000_000;
        assert_eq!((ms(true, 0), ms(true, 4), ms(true, 7)), (180, 100, 40));
        assert_eq!((ms(false, 0), ms(false, 4), ms(false, 7)), (72, 40, 16));
    }
}
