//! cfq: Completely Fair Queuing, time slices per task.
//!
//! CFQ as Linux had it from 2.6.33 to the 3.x series (block/cfq-iosched.c,
//! read in its 3.10 form; Documentation/block/cfq-iosched.txt and
//! Documentation/block/ioprio.txt). Algorithm only: the code is ours.
//!
//! # Entities
//! - A **queue** per task for its synchronous I/O (reads, sync writes),
//!   keyed by `TaskId` (the kernel's io_context), and shared queues for
//!   asynchronous writes, one per (class, level) (RT 0-7, BE 0-7, IDLE),
//!   all in the root group as in 3.x. Each queue keeps its own
//!   sector-sorted list with merging (so requests only merge within their
//!   queue), its own FIFO with `fifo_expire_sync`/`fifo_expire_async`
//!   deadlines, and `next_rq`, the next request of a one-way elevator with
//!   bounded back seeks (`back_seek_max`, `back_seek_penalty`).
//! - **Service trees** per group: for RT and BE one each for the three
//!   workload types (SYNC = idling queues, SYNC_NOIDLE, ASYNC), one for
//!   IDLE. A queue with requests sits in its tree keyed by a time:
//!   `now + (busy queues in group − 1) × (slice(level 0) − slice(level)) −
//!   slice_resid`, so lower levels are placed further right and come round
//!   less often, and leftover or overrun slice moves a queue left or right.
//! - **Groups** on a group tree keyed by `vdisktime`: each expiry charges
//!   the group the disk time its queue used, divided by the group's share
//!   (`vfraction`, weight over the active siblings' weights, compounded up
//!   the hierarchy, 3.x's `cfq_group_service_tree_add`). Sync queues live
//!   in their task's group (`Request::group`). Parents and weights come
//!   from [`Cfq::set_group_tree`], the hook for `io.weight`-style group
//!   weights (1-1000, default 100); a group it does not name is a child of
//!   the root with the default weight. (The kernel's blkio default was 500
//!   with 1000 for the root's own tasks; here the root's tasks weigh what
//!   the tree says.)
//!
//! # Selection (one request per `dispatch`)
//! Keep the active queue while its slice lasts and it has requests; when
//! it runs dry, idle for `slice_idle` if its task is likely to issue again
//! soon (mean think time ≤ `slice_idle`, not seeky unless deep; never on a
//! non-rotational device with command queueing), or for `group_idle` when
//! it is its group's last queue. Otherwise expire it and pick: the group
//! with the lowest vdisktime; within it the class, RT before BE before IDLE
//! (strictly: RT can starve BE); within the class the workload type (kept
//! until its workload slice, a share of `target_latency`, expires; then the
//! type whose first queue has the lowest key); and the leftmost queue of
//! that tree.
//!
//! The class decides who may use the disk; the level decides how much time
//! a queue gets per round: its slice is `base + base/5 × (4 − level)` with
//! base `slice_sync` (100 ms: 180 … 40 ms) or `slice_async` (40 ms: 72 …
//! 16 ms), and with `low_latency` it is scaled down when the averaged
//! number of busy queues of its class would make a round longer than
//! `target_latency` (never below `2 × slice_idle × slice / slice_sync`).
//! So a lower RT level still gets a smaller share, never none. The slice
//! starts at the queue's first completion. IDLE-class queues are served
//! only when no RT or BE queue is busy and no RT/BE request has completed
//! for `CFQ_IDLE_DELAY` (200 ms, HZ/5), one request at a time.
//!
//! Dispatch limits (`may_dispatch`): a queue that would idle waits for
//! async requests in the driver to drain; an async queue waits while sync
//! requests are in the driver; a queue dispatches up to `quantum / 2`
//! requests, up to `quantum` early in its slice when others wait, without
//! limit when alone; IDLE one at a time. With `low_latency`, async depth
//! ramps up with the time since a sync request last completed late (more
//! than `fifo_expire_sync` after it was queued, `last_delayed_sync`). An
//! async queue that dispatched `2 × slice_async_rq × (8 − level)` requests
//! is expired if others wait. The FIFO is checked once per slice.
//!
//! Preemption (a request for queue N while A is active), in order: never
//! by IDLE; always of IDLE; never of RT by non-RT; sync preempts async;
//! not across groups; yes when A's slice is used, when both are
//! SYNC_NOIDLE with A empty and N's tree holding just the two, when N is RT
//! and A is not, when the request is metadata (`REQ_PRIO`) and A has none
//! queued, when A is empty and would not idle, or when A is idling and the
//! request is within 4 MiB of the head. Within a queue, sync goes before
//! async and then metadata before data (`cfq_choose_req`). The preempting queue goes
//! to the front of its tree with a fresh slice; A keeps its leftover.
//!
//! `hw_tag` (command queueing) is detected from the depth the driver is
//! seen to reach: after 50 samples under load, on if it reached 5.
//!
//! # Modelling notes
//! - Time is in nanoseconds, where the kernel counted jiffies; "one jiffy"
//!   (slice nearly over, slice started this tick) is 1 ms (HZ = 1000).
//! - A queue whose next request carries `REQ_NOIDLE` ([`Request::noidle`]:
//!   fsync and journal writes, `WRITE_SYNC`) does not idle
//!   (`cfq_update_idle_window`); O_DIRECT writes carry no NOIDLE, so a
//!   direct writer idles as a reader does.
//! - Close cooperators (another sync queue with its next request within
//!   4 MiB of the head) are served next instead of idling, as in the
//!   kernel, but the queues are not merged (`cfq_setup_merge` is left out).
//! - The idle-class grace period is the explicit rule of 2.6.1x–2.6.2x
//!   CFQ (`CFQ_IDLE_GRACE`, an `idle_class_timer`), applied here with
//!   `CFQ_IDLE_DELAY` = HZ/5, the constant later kernels used to push idle
//!   queues back.
//! - In iops mode (`slice_idle = 0` with command queueing) a group is
//!   charged one jiffy per request dispatched, the kernel's unit mix.
//!
//! # Invariants
//! - A queue is in a service tree exactly when it is busy (`on_rr`); every
//!   busy queue but the active one has requests queued.
//! - A group is in the group tree exactly when it has busy queues.
//! - `rq_queued` is the number of requests in all queues' sorted lists.
//!
//! # Starvation bound
//! None. RT queues starve BE and IDLE for as long as they stay busy, and
//! IDLE waits for every RT/BE request; so no bound holds for every
//! workload, which is all `starvation_bound` can express. With BE only, a
//! queued request waits at most about one round of the other busy queues'
//! slices plus their key offsets, `(n − 1) × (180 − 40) ms`, and its own
//! FIFO expiry; that is not promised through the trait.

use crate::queue::MergeOutcome;
use crate::stats::{Ewma, SeekHistory};
use crate::{
    BackSeek, Dispatch, MergeRule, Scheduler, SchedulerType, SortedQueue, Tunable, Tunables,
};
use elevator_core::{
    Duration, GroupId, GroupTree, Instant, IoClass, Op, QueueLimits, Request, RequestId, Sector,
    TaskId, IOPRIO_LEVELS,
};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// Requests a queue may have in the driver per round (`cfq_quantum`): 8 in
/// 2.6.33 and later (3.10 source); 2.6.2x sources read 4. Whether 2.6.32
/// itself had 4 or 8 is unverified.
pub const QUANTUM: i64 = 8;
/// FIFO deadline of sync requests, HZ/8 (`cfq_fifo_expire[1]`).
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
/// Idling wait for a group's next request, HZ/125 (`cfq_group_idle`, 2.6.37+).
pub const GROUP_IDLE_MS: i64 = 8;
/// Slice scaling and async ramp-up on (`cfq_latency`, 2.6.33+).
pub const LOW_LATENCY: i64 = 1;
/// Round length low_latency aims for, 300 ms (`cfq_target_latency`, 3.x).
pub const TARGET_LATENCY_MS: i64 = 300;

/// Weight of a group when no group tree was given: `io.weight`'s default
/// (elevator-core). The kernel's blkio default was 500 (root 1000).
pub const GROUP_WEIGHT_DEFAULT: u32 = elevator_core::DEFAULT_WEIGHT;

const HZ: i64 = 1_000_000_000;
/// One jiffy at HZ = 1000.
const JIFFY: Duration = Duration::from_millis(1);
/// Idle-class grace and group/idle-queue push-back, HZ/5 (`CFQ_IDLE_DELAY`).
const IDLE_DELAY: Duration = Duration::from_millis(200);
/// Shortest workload slice, 2 jiffies (`CFQ_MIN_TT`).
const MIN_TT: Duration = Duration::from_millis(2);
/// Slice step per level is base / 5 (`CFQ_SLICE_SCALE`).
const SLICE_SCALE: i64 = 5;
/// Depth that means command queueing (`CFQ_HW_QUEUE_MIN`).
const HW_QUEUE_MIN: u32 = 5;
/// Samples before deciding `hw_tag`.
const HW_TAG_SAMPLES: u32 = 50;
/// Fixed-point shift of group fractions (`CFQ_SERVICE_SHIFT`).
const SERVICE_SHIFT: u32 = 12;
/// A request further than this from the previous one is a seek (`CFQQ_SEEK_THR`).
const SEEK_THR: Sector = 8 * 100;
/// A request this close to the head is "close" (`CFQQ_CLOSE_THR`, 4 MiB).
const CLOSE_THR: Sector = 8 * 1024;
/// On flash, a request smaller than this counts as a seek (`CFQQ_SECT_THR_NONROT`).
const SECT_THR_NONROT: u32 = 2 * 32;
/// Seeky: more than 32/8 of the last 32 requests were seeks (`CFQQ_SEEKY`).
const SEEKY_SEEKS: u32 = 32 / 8;
/// Weight of history in the busy-queue average (`cfq_hist_divisor`).
const HIST_DIVISOR: u32 = 4;
/// A queue this deep is "deep" and may idle though seeky.
const DEEP_QUEUED: usize = 4;
/// Requests larger than a page dispatch at once while idling.
const PAGE_BYTES: u64 = 4096;

pub const TYPE: SchedulerType = SchedulerType {
    name: "cfq",
    aliases: &["cfq-iosched"],
    about:
        "per-task queues with time slices by I/O priority, idling, groups (Linux 2.6.33-3.x CFQ)",
    honours: &["ioprio", "weights", "groups"],
    tunables: &[
        Tunable {
            name: "quantum",
            default: QUANTUM,
            unit: "requests",
            about: "requests a queue may have in the driver in one round",
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
            name: "group_idle",
            default: GROUP_IDLE_MS,
            unit: "ms",
            about: "idle wait for a group's next request",
        },
        Tunable {
            name: "low_latency",
            default: LOW_LATENCY,
            unit: "bool",
            about: "scale slices to target_latency and ramp async depth",
        },
        Tunable {
            name: "target_latency",
            default: TARGET_LATENCY_MS,
            unit: "ms",
            about: "round length low_latency aims for",
        },
    ],
    build: |t, limits| Box::new(Cfq::from_tunables(t, limits)),
};

/// Index of a queue in the slab.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct QueueId(u32);

/// Service class of a queue (`wl_class_t`; BE is 0 as in the kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum WlClass {
    Be = 0,
    Rt = 1,
    Idle = 2,
}

/// Workload type of a queue (`wl_type_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WlType {
    Async = 0,
    SyncNoidle = 1,
    Sync = 2,
}

const WL_TYPES: [WlType; 3] = [WlType::Async, WlType::SyncNoidle, WlType::Sync];
const IDLE_TREE: usize = 6;

fn tree_index(class: WlClass, ty: WlType) -> usize {
    match class {
        WlClass::Idle => IDLE_TREE,
        c => c as usize * 3 + ty as usize,
    }
}

fn is_sync(r: &Request) -> bool {
    r.op == Op::Read || r.sync
}

fn ns(t: Instant) -> i64 {
    t.nanos() as i64
}

/// A service tree: busy queues by key (ties in insertion order), with the
/// think time of the tree's queues.
#[derive(Debug, Default)]
struct ServiceTree {
    queues: BTreeSet<(i64, u64, QueueId)>,
    ttime: Ewma,
    last_end_request: Instant,
}

impl ServiceTree {
    fn count(&self) -> u32 {
        self.queues.len() as u32
    }
    fn first(&self) -> Option<(i64, QueueId)> {
        self.queues.iter().next().map(|&(k, _, q)| (k, q))
    }
}

/// A group of queues (`cfq_group`).
#[derive(Debug)]
struct CfqGroup {
    parent: Option<usize>,
    weight: u32,
    /// Weight against the group's own child groups (3.x `leaf_weight`).
    leaf_weight: u32,
    /// Active children (and self), and the sum of their weights.
    nr_active: u32,
    children_weight: u64,
    vdisktime: u64,
    /// Share of the device, fixed point with `SERVICE_SHIFT`.
    vfraction: u64,
    /// Position in the group tree, if on it.
    tree_key: Option<(u64, u64)>,
    /// Busy queues of the group.
    nr_cfqq: u32,
    busy_queues_avg: [u32; 3],
    trees: [ServiceTree; 7],
    saved_workload: Option<(Duration, WlClass, WlType)>,
    dispatched: u32,
    ttime: Ewma,
    last_end_request: Instant,
}

impl CfqGroup {
    fn new(parent: Option<usize>, weight: u32) -> Self {
        CfqGroup {
            parent,
            weight,
            leaf_weight: weight,
            nr_active: 0,
            children_weight: 0,
            vdisktime: 0,
            vfraction: 0,
            tree_key: None,
            nr_cfqq: 0,
            busy_queues_avg: [0; 3],
            trees: Default::default(),
            saved_workload: None,
            dispatched: 0,
            ttime: Ewma::default(),
            last_end_request: Instant::ZERO,
        }
    }
}

/// One queue (`cfq_queue`).
#[derive(Debug)]
struct CfqQueue {
    sorted: SortedQueue,
    /// (deadline, id), earliest first.
    fifo: BTreeSet<(Instant, RequestId)>,
    fifo_time: FxHashMap<RequestId, Instant>,
    next_rq: Option<RequestId>,
    sync: bool,
    class: WlClass,
    level: u8,
    group: usize,
    /// The task of a sync queue, until it exits.
    owner: Option<TaskId>,
    /// Busy: in a service tree.
    on_rr: bool,
    /// (tree index, key, sequence) while in a service tree.
    tree: Option<(usize, i64, u64)>,
    /// (level, sector) in the close-cooperator trees.
    prio_key: Option<(u8, Sector)>,
    dispatch_start: Instant,
    slice_start: Option<Instant>,
    slice_end: Instant,
    allocated_slice: Duration,
    /// Leftover (positive) or overrun (negative) slice, ns.
    slice_resid: i64,
    slice_dispatch: u32,
    /// Requests in the driver.
    dispatched: u32,
    wait_request: bool,
    must_dispatch: bool,
    fifo_checked: bool,
    idle_window: bool,
    slice_new: bool,
    deep: bool,
    wait_busy: bool,
    seek_history: SeekHistory,
    last_request_pos: Sector,
}

impl CfqQueue {
    fn new(sync: bool, class: WlClass, level: u8, group: usize, owner: Option<TaskId>) -> Self {
        CfqQueue {
            sorted: SortedQueue::new(),
            fifo: BTreeSet::new(),
            fifo_time: FxHashMap::default(),
            next_rq: None,
            sync,
            class,
            level,
            group,
            owner,
            on_rr: false,
            tree: None,
            prio_key: None,
            dispatch_start: Instant::ZERO,
            slice_start: None,
            slice_end: Instant::ZERO,
            allocated_slice: Duration::ZERO,
            slice_resid: 0,
            slice_dispatch: 0,
            dispatched: 0,
            wait_request: false,
            must_dispatch: false,
            fifo_checked: false,
            idle_window: sync && class != WlClass::Idle,
            slice_new: true,
            deep: false,
            wait_busy: false,
            seek_history: SeekHistory::default(),
            last_request_pos: 0,
        }
    }

    fn wl_type(&self) -> WlType {
        if !self.sync {
            WlType::Async
        } else if !self.idle_window {
            WlType::SyncNoidle
        } else {
            WlType::Sync
        }
    }

    fn seeky(&self) -> bool {
        self.seek_history.seeks() > SEEKY_SEEKS
    }
}

/// Per-task state (the kernel's `cfq_io_cq`): think time.
#[derive(Debug)]
struct TaskState {
    ttime: Ewma,
    last_end_request: Instant,
}

/// The CFQ policy.
#[derive(Debug)]
pub struct Cfq {
    quantum: u32,
    /// [async, sync]
    fifo_expire: [Duration; 2],
    back_seek: BackSeek,
    /// [async, sync]
    slice: [Duration; 2],
    slice_async_rq: u32,
    slice_idle: Duration,
    group_idle: Duration,
    low_latency: bool,
    target_latency: Duration,
    rotational: bool,
    rule: MergeRule,

    queues: Vec<Option<CfqQueue>>,
    free: Vec<QueueId>,
    sync_queues: FxHashMap<TaskId, QueueId>,
    async_queues: FxHashMap<(u8, u8), QueueId>,
    tasks: FxHashMap<TaskId, TaskState>,
    /// Requests in the driver: their queue, and whether they were RT/BE
    /// when dispatched (a queue's class may change meanwhile).
    in_flight: FxHashMap<RequestId, (QueueId, bool)>,

    groups: Vec<CfqGroup>,
    group_index: FxHashMap<GroupId, usize>,
    /// Parent and weight of each group, from `set_group_tree`.
    group_conf: FxHashMap<GroupId, (Option<GroupId>, u32)>,
    group_tree: BTreeSet<(u64, u64, usize)>,
    min_vdisktime: u64,
    seq: u64,

    serving_group: usize,
    serving_class: WlClass,
    serving_type: WlType,
    workload_expires: Option<Instant>,

    /// Busy non-idle queues by the sector of their next request, per level.
    prio_trees: [BTreeSet<(Sector, QueueId)>; IOPRIO_LEVELS as usize],

    busy_queues: u32,
    busy_sync_queues: u32,
    rq_in_driver: u32,
    /// [async, sync] requests in the driver, by their queue.
    rq_in_flight: [u32; 2],
    rq_queued: usize,
    nonidle_in_flight: u32,
    hw_tag: i8,
    hw_tag_est_depth: u32,
    hw_tag_samples: u32,

    idle_timer: Option<Instant>,
    active: Option<QueueId>,
    active_task: Option<TaskId>,
    last_position: Sector,
    /// When a sync request last completed late, ns (may precede the run).
    last_delayed_sync: i64,
    /// When an RT/BE request last completed.
    last_nonidle_end: Instant,
}

impl Cfq {
    pub fn from_tunables(t: &Tunables, limits: &QueueLimits) -> Self {
        let ms = |name: &str| Duration::from_millis(t.get(name) as u64);
        let mut cfq = Cfq {
            quantum: t.get("quantum").max(1) as u32,
            fifo_expire: [ms("fifo_expire_async"), ms("fifo_expire_sync")],
            back_seek: BackSeek {
                max: t.get("back_seek_max") as u64 * 2,
                penalty: t.get("back_seek_penalty").max(1) as u64,
            },
            slice: [ms("slice_async").max(JIFFY), ms("slice_sync").max(JIFFY)],
            slice_async_rq: t.get("slice_async_rq").max(1) as u32,
            slice_idle: ms("slice_idle"),
            group_idle: ms("group_idle"),
            low_latency: t.get("low_latency") != 0,
            target_latency: ms("target_latency").max(JIFFY),
            rotational: limits.rotational,
            rule: MergeRule {
                max_sectors: limits.max_sectors,
                front_merges: true,
                // Each queue has its own sorted list: merging stays within
                // the queue (the kernel's cfq_allow_merge), which for a
                // shared async queue spans tasks.
                same_task: false,
            },
            queues: Vec::new(),
            free: Vec::new(),
            sync_queues: FxHashMap::default(),
            async_queues: FxHashMap::default(),
            tasks: FxHashMap::default(),
            in_flight: FxHashMap::default(),
            groups: Vec::new(),
            group_index: FxHashMap::default(),
            group_conf: FxHashMap::default(),
            group_tree: BTreeSet::new(),
            min_vdisktime: 0,
            seq: 0,
            serving_group: 0,
            serving_class: WlClass::Be,
            serving_type: WlType::Async,
            workload_expires: None,
            prio_trees: Default::default(),
            busy_queues: 0,
            busy_sync_queues: 0,
            rq_in_driver: 0,
            rq_in_flight: [0, 0],
            rq_queued: 0,
            nonidle_in_flight: 0,
            hw_tag: -1,
            hw_tag_est_depth: 0,
            hw_tag_samples: 0,
            idle_timer: None,
            active: None,
            active_task: None,
            last_position: 0,
            // The kernel assumes no sync request was delayed in the last
            // second, so async depth starts high.
            last_delayed_sync: -HZ,
            last_nonidle_end: Instant::ZERO,
        };
        cfq.groups.push(CfqGroup::new(None, GROUP_WEIGHT_DEFAULT));
        cfq.group_index.insert(GroupId::ROOT, 0);
        cfq
    }

    /// With the kernel's defaults.
    pub fn new(limits: &QueueLimits) -> Self {
        let t = TYPE.tunables(std::iter::empty()).expect("defaults");
        Cfq::from_tunables(&t, limits)
    }

    /// Take group parents and weights from `tree` (the hook for
    /// `io.weight`): a group's share is its weight over its active
    /// siblings' (and its parent's own tasks') weights, compounded up to
    /// the root. New weights apply when a group next becomes busy, as the
    /// kernel's `new_weight` did.
    pub fn set_group_tree(&mut self, tree: &GroupTree) {
        for g in tree.iter() {
            self.group_conf.insert(g.id, (g.parent, g.weight.max(1)));
            if let Some(&idx) = self.group_index.get(&g.id) {
                if self.groups[idx].tree_key.is_none() && self.groups[idx].nr_active == 0 {
                    self.groups[idx].weight = g.weight.max(1);
                    self.groups[idx].leaf_weight = g.weight.max(1);
                }
            }
        }
    }

    // ----- small accessors -------------------------------------------------

    fn q(&self, id: QueueId) -> &CfqQueue {
        self.queues[id.0 as usize].as_ref().expect("live queue")
    }

    fn qm(&mut self, id: QueueId) -> &mut CfqQueue {
        self.queues[id.0 as usize].as_mut().expect("live queue")
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// The base slice of a queue: `base + base/5 × (4 − level)`.
    fn prio_slice(&self, sync: bool, level: u8) -> Duration {
        let base = self.slice[usize::from(sync)].nanos() as i64;
        let s = base + base / SLICE_SCALE * (4 - i64::from(level));
        Duration(s.max(0) as u64)
    }

    fn iops_mode(&self) -> bool {
        self.slice_idle == Duration::ZERO && self.hw_tag != 0
    }

    fn ncq_flash(&self) -> bool {
        !self.rotational && self.hw_tag != 0
    }

    fn thinktime_big(ttime: &Ewma, limit: Duration) -> bool {
        ttime.valid() && ttime.mean() > limit.nanos()
    }

    fn slice_used(&self, id: QueueId, now: Instant) -> bool {
        let q = self.q(id);
        !q.slice_new && now >= q.slice_end
    }

    /// Busy queues of `class` in group `g`.
    fn busy_wl(&self, g: usize, class: WlClass) -> u32 {
        let t = &self.groups[g].trees;
        match class {
            WlClass::Idle => t[IDLE_TREE].count(),
            c => WL_TYPES
                .iter()
                .map(|&ty| t[tree_index(c, ty)].count())
                .sum(),
        }
    }

    fn busy_async(&self, g: usize) -> u32 {
        let t = &self.groups[g].trees;
        t[tree_index(WlClass::Rt, WlType::Async)].count()
            + t[tree_index(WlClass::Be, WlType::Async)].count()
    }

    /// Averaged busy queues of a class: rises at once, decays slowly.
    fn group_avg_queues(&mut self, g: usize, class: WlClass) -> u32 {
        let busy = self.busy_wl(g, class);
        let avg = &mut self.groups[g].busy_queues_avg[class as usize];
        let (lo, hi) = ((*avg).min(busy), (*avg).max(busy));
        *avg = ((HIST_DIVISOR - 1) * hi + lo + HIST_DIVISOR / 2) / HIST_DIVISOR;
        *avg
    }

    /// `target_latency` times the group's share.
    fn group_slice(&self, g: usize) -> Duration {
        Duration((self.target_latency.nanos() * self.groups[g].vfraction) >> SERVICE_SHIFT)
    }

    /// The slice a queue gets now: its level's, scaled to `target_latency`
    /// under `low_latency` when its class has many busy queues.
    fn scaled_slice(&mut self, id: QueueId) -> Duration {
        let (sync, level, class, g) = {
            let q = self.q(id);
            (q.sync, q.level, q.class, q.group)
        };
        let mut slice = self.prio_slice(sync, level).nanos();
        if self.low_latency {
            // The kernel indexes with "is RT": IDLE queues count BE's.
            let avg_class = if class == WlClass::Rt {
                WlClass::Rt
            } else {
                WlClass::Be
            };
            let iq = u64::from(self.group_avg_queues(g, avg_class));
            let sync_slice = self.slice[1].nanos();
            let expect = sync_slice * iq;
            let group_slice = self.group_slice(g).nanos();
            if expect > group_slice {
                let base_low = 2 * self.slice_idle.nanos();
                let low = slice.min(base_low * slice / sync_slice);
                slice = (slice * group_slice / expect).max(low);
            }
        }
        Duration(slice)
    }

    fn set_prio_slice(&mut self, id: QueueId, now: Instant) {
        let slice = self.scaled_slice(id);
        let q = self.qm(id);
        q.slice_start = Some(now);
        q.slice_end = now + slice;
        q.allocated_slice = slice;
    }

    // ----- requests within a queue ----------------------------------------

    /// The better of two requests of queue `id` for a head at `last`: the
    /// one-way elevator with bounded, penalised back seeks.
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

    /// The next request after dispatching `last` (still queued): the better
    /// of its successor (wrapping to the first) and its predecessor.
    fn find_next_rq(&self, id: QueueId, last: RequestId) -> Option<RequestId> {
        let sorted = &self.q(id).sorted;
        let next = sorted
            .next_after(last)
            .or_else(|| sorted.first().filter(|&f| f != last));
        let prev = sorted.prev_before(last);
        let pos = sorted.get(last).expect("queued").sector;
        self.choose_req(id, next, prev, pos)
    }

    fn prio_tree_remove(&mut self, id: QueueId) {
        if let Some((level, sector)) = self.qm(id).prio_key.take() {
            self.prio_trees[level as usize].remove(&(sector, id));
        }
    }

    /// Re-key a busy queue in the close-cooperator tree of its level.
    fn prio_tree_update(&mut self, id: QueueId) {
        self.prio_tree_remove(id);
        let q = self.q(id);
        if q.class == WlClass::Idle || !q.on_rr {
            return;
        }
        let Some(next) = q.next_rq else { return };
        let sector = q.sorted.get(next).expect("queued").sector;
        let level = q.level;
        self.prio_trees[level as usize].insert((sector, id));
        self.qm(id).prio_key = Some((level, sector));
    }

    // ----- groups -------------------------------------------------------------

    fn group_idx(&mut self, id: GroupId) -> usize {
        if let Some(&i) = self.group_index.get(&id) {
            return i;
        }
        let (parent, weight) = self
            .group_conf
            .get(&id)
            .copied()
            .unwrap_or((Some(GroupId::ROOT), GROUP_WEIGHT_DEFAULT));
        let parent = parent.map(|p| self.group_idx(p));
        let idx = self.groups.len();
        self.groups.push(CfqGroup::new(parent, weight));
        self.group_index.insert(id, idx);
        idx
    }

    /// Put group `g` on the group tree and work out its share (3.x
    /// `cfq_group_service_tree_add`): activate it and its ancestors, then
    /// compound leaf_weight/children_weight and weight/parent's
    /// children_weight up to the root.
    fn group_tree_add(&mut self, g: usize) {
        let seq = self.next_seq();
        let key = (self.groups[g].vdisktime, seq);
        self.group_tree.insert((key.0, key.1, g));
        self.groups[g].tree_key = Some(key);

        let mut vfr: u64 = 1 << SERVICE_SHIFT;
        let mut propagate = self.groups[g].nr_active == 0;
        self.groups[g].nr_active += 1;
        self.groups[g].children_weight += u64::from(self.groups[g].leaf_weight);
        vfr = vfr * u64::from(self.groups[g].leaf_weight) / self.groups[g].children_weight;
        let mut pos = g;
        while let Some(parent) = self.groups[pos].parent {
            let w = u64::from(self.groups[pos].weight);
            if propagate {
                propagate = self.groups[parent].nr_active == 0;
                self.groups[parent].nr_active += 1;
                self.groups[parent].children_weight += w;
            }
            vfr = vfr * w / self.groups[parent].children_weight;
            pos = parent;
        }
        self.groups[g].vfraction = vfr.max(1);
    }

    /// Undo `group_tree_add`.
    fn group_tree_del(&mut self, g: usize) {
        if let Some((k, s)) = self.groups[g].tree_key.take() {
            self.group_tree.remove(&(k, s, g));
        }
        self.groups[g].nr_active -= 1;
        let mut propagate = self.groups[g].nr_active == 0;
        self.groups[g].children_weight -= u64::from(self.groups[g].leaf_weight);
        let mut pos = g;
        while propagate {
            self.groups[pos].vfraction = 0;
            let Some(parent) = self.groups[pos].parent else {
                break;
            };
            self.groups[parent].nr_active -= 1;
            propagate = self.groups[parent].nr_active == 0;
            self.groups[parent].children_weight -= u64::from(self.groups[pos].weight);
            pos = parent;
        }
    }

    fn group_notify_queue_add(&mut self, g: usize) {
        self.groups[g].nr_cfqq += 1;
        if self.groups[g].tree_key.is_some() {
            return;
        }
        // A group becoming busy goes to the back of the group tree.
        self.groups[g].vdisktime = match self.group_tree.iter().next_back() {
            Some(&(v, _, _)) => v + IDLE_DELAY.nanos(),
            None => self.min_vdisktime,
        };
        self.group_tree_add(g);
    }

    fn group_notify_queue_del(&mut self, g: usize) {
        self.groups[g].nr_cfqq -= 1;
        if self.groups[g].nr_cfqq > 0 {
            return;
        }
        self.group_tree_del(g);
        self.groups[g].saved_workload = None;
    }

    /// Disk time queue `id` used in its slice.
    fn slice_usage(&self, id: QueueId, now: Instant) -> Duration {
        let q = self.q(id);
        match q.slice_start {
            // Expired before (or just at) its first completion: charge the
            // time since its first dispatch, so seeks are not free.
            Some(start) if now.since(start) >= JIFFY => now.since(start).min(q.allocated_slice),
            _ => now.since(q.dispatch_start).max(JIFFY),
        }
    }

    /// Charge group `g` for the slice queue `id` just ended.
    fn group_served(&mut self, g: usize, id: QueueId, now: Instant) {
        let nr_sync = i64::from(self.groups[g].nr_cfqq)
            - i64::from(self.busy_async(g))
            - i64::from(self.groups[g].trees[IDLE_TREE].count());
        debug_assert!(nr_sync >= 0);
        let mut charge = self.slice_usage(id, now);
        let q = self.q(id);
        if self.iops_mode() {
            charge = JIFFY.mul(u64::from(q.slice_dispatch));
        } else if !q.sync && nr_sync == 0 {
            charge = q.allocated_slice;
        }
        if self.groups[g].tree_key.is_some() {
            let vfr = self.groups[g].vfraction.max(1);
            self.group_tree_del(g);
            self.groups[g].vdisktime += (charge.nanos() << SERVICE_SHIFT) / vfr;
            self.group_tree_add(g);
        }
        // Remember the workload state the group was in.
        self.groups[g].saved_workload = match self.workload_expires {
            Some(e) if e > now => Some((e.since(now), self.serving_class, self.serving_type)),
            _ => None,
        };
    }

    // ----- service trees ----------------------------------------------------

    /// (Re)insert queue `id` in its service tree (`cfq_service_tree_add`).
    fn service_tree_add(&mut self, id: QueueId, add_front: bool, now: Instant) {
        let (g, class, ty) = {
            let q = self.q(id);
            (q.group, q.class, q.wl_type())
        };
        let ti = tree_index(class, ty);
        let key = if class == WlClass::Idle {
            // Behind every other idle queue.
            let last = self.groups[g].trees[ti]
                .queues
                .iter()
                .next_back()
                .filter(|&&(_, _, q)| q != id)
                .map(|&(k, _, _)| k);
            IDLE_DELAY.nanos() as i64 + last.unwrap_or(ns(now))
        } else if !add_front {
            let offset = self.slice_offset(id);
            let q = self.qm(id);
            let key = offset + ns(now) - q.slice_resid;
            q.slice_resid = 0;
            key
        } else {
            -HZ + self.groups[g].trees[ti].first().map_or(ns(now), |(k, _)| k)
        };
        let mut new_queue = true;
        if let Some((old_ti, old_key, old_seq)) = self.q(id).tree {
            new_queue = false;
            if old_ti == ti && old_key == key {
                return;
            }
            self.groups[g].trees[old_ti]
                .queues
                .remove(&(old_key, old_seq, id));
        }
        let seq = self.next_seq();
        self.groups[g].trees[ti].queues.insert((key, seq, id));
        self.qm(id).tree = Some((ti, key, seq));
        if add_front || !new_queue {
            return;
        }
        self.group_notify_queue_add(g);
    }

    /// How far right of `now` a queue goes: `(busy in group − 1) ×
    /// (slice(sync, 0) − slice(its own))` (the kernel's approximation).
    fn slice_offset(&self, id: QueueId) -> i64 {
        let q = self.q(id);
        let nr = i64::from(self.groups[q.group].nr_cfqq) - 1;
        let d = self.prio_slice(true, 0).nanos() as i64
            - self.prio_slice(q.sync, q.level).nanos() as i64;
        nr * d
    }

    fn resort_rr_list(&mut self, id: QueueId, now: Instant) {
        if self.q(id).on_rr {
            self.service_tree_add(id, false, now);
            self.prio_tree_update(id);
        }
    }

    fn add_cfqq_rr(&mut self, id: QueueId, now: Instant) {
        let q = self.qm(id);
        debug_assert!(!q.on_rr);
        q.on_rr = true;
        let sync = q.sync;
        self.busy_queues += 1;
        if sync {
            self.busy_sync_queues += 1;
        }
        self.resort_rr_list(id, now);
    }

    fn del_cfqq_rr(&mut self, id: QueueId) {
        let (g, sync, tree) = {
            let q = self.qm(id);
            debug_assert!(q.on_rr);
            q.on_rr = false;
            (q.group, q.sync, q.tree.take())
        };
        if let Some((ti, key, seq)) = tree {
            self.groups[g].trees[ti].queues.remove(&(key, seq, id));
        }
        self.prio_tree_remove(id);
        self.group_notify_queue_del(g);
        self.busy_queues -= 1;
        if sync {
            self.busy_sync_queues -= 1;
        }
    }

    // ----- queues of tasks ----------------------------------------------------

    fn alloc_queue(&mut self, q: CfqQueue) -> QueueId {
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
            return; // already freed
        };
        if q.sync
            && q.owner.is_none()
            && !q.on_rr
            && q.dispatched == 0
            && q.sorted.is_empty()
            && self.active != Some(id)
        {
            self.prio_tree_remove(id);
            self.queues[id.0 as usize] = None;
            self.free.push(id);
        }
    }

    /// The queue a new request goes to, created if needed.
    fn queue_for(&mut self, r: &Request, sync: bool) -> QueueId {
        let (class, level) = match r.prio.effective_class() {
            IoClass::RealTime => (WlClass::Rt, r.prio.level()),
            IoClass::Idle => (WlClass::Idle, IOPRIO_LEVELS - 1),
            _ => (WlClass::Be, r.prio.level()),
        };
        if sync {
            let g = self.group_idx(r.group);
            if let Some(&id) = self.sync_queues.get(&r.task) {
                let idle_now = self.active != Some(id);
                let q = self.qm(id);
                // A task moved to another group: follow it once its queue
                // is idle (the kernel drops the queue and makes a new one).
                if q.group != g && !q.on_rr && q.dispatched == 0 && idle_now {
                    q.group = g;
                }
                // ionice while running (`cfq_init_prio_data`): the queue
                // moves trees at its next resort.
                if (q.class, q.level) != (class, level) {
                    q.class = class;
                    q.level = level;
                    if class == WlClass::Idle {
                        q.idle_window = false;
                    }
                }
                return id;
            }
            let id = self.alloc_queue(CfqQueue::new(true, class, level, g, Some(r.task)));
            self.sync_queues.insert(r.task, id);
            id
        } else {
            // Class NONE shares the level-4 async queue (IOPRIO_NORM).
            let level = if r.prio.class() == IoClass::None {
                4
            } else {
                level
            };
            let key = (class as u8, level);
            if let Some(&id) = self.async_queues.get(&key) {
                return id;
            }
            // Async queues live in the root group (3.x).
            let id = self.alloc_queue(CfqQueue::new(false, class, level, 0, None));
            self.async_queues.insert(key, id);
            id
        }
    }

    // ----- arrival ----------------------------------------------------------

    /// Think time, seekiness, idle window, preemption (`cfq_rq_enqueued`).
    fn rq_enqueued(&mut self, id: QueueId, r: &Request, now: Instant) {
        let limit = self.slice_idle.mul(2);
        let (sync, g, tree) = {
            let q = self.q(id);
            (q.sync, q.group, q.tree)
        };
        if sync {
            if let Some(ts) = self.tasks.get_mut(&r.task) {
                let x = now.since(ts.last_end_request).min(limit);
                ts.ttime.add(x.nanos());
            }
            if let Some((ti, _, _)) = tree {
                let st = &mut self.groups[g].trees[ti];
                let x = now.since(st.last_end_request).min(limit);
                st.ttime.add(x.nanos());
            }
        }
        let group_limit = self.group_idle.mul(2);
        let grp = &mut self.groups[g];
        let x = now.since(grp.last_end_request).min(group_limit);
        grp.ttime.add(x.nanos());

        let rotational = self.rotational;
        let q = self.qm(id);
        let sdist = if q.last_request_pos == 0 {
            0
        } else {
            r.sector.abs_diff(q.last_request_pos)
        };
        q.seek_history.record(if rotational {
            sdist > SEEK_THR
        } else {
            r.sectors < SECT_THR_NONROT
        });
        self.update_idle_window(id, r.task);
        self.qm(id).last_request_pos = r.end();

        if self.active == Some(id) {
            let busy = self.busy_queues;
            let q = self.qm(id);
            if q.wait_request {
                // Anything bigger than a page, or a busy system: stop
                // idling and dispatch; else let merging happen first.
                if r.bytes() > PAGE_BYTES || busy > 1 {
                    q.wait_request = false;
                    self.idle_timer = None;
                } else {
                    q.must_dispatch = true;
                }
            }
        } else if self.should_preempt(id, r, now) {
            self.preempt_queue(id, now);
        }
    }

    /// Whether a sync queue should keep idling (`cfq_update_idle_window`).
    fn update_idle_window(&mut self, id: QueueId, task: TaskId) {
        let slice_idle = self.slice_idle;
        let ttime = self.tasks.get(&task).map(|t| t.ttime);
        let q = self.qm(id);
        if !q.sync || q.class == WlClass::Idle {
            return;
        }
        if q.sorted.len() >= DEEP_QUEUED {
            q.deep = true;
        }
        let noidle = q
            .next_rq
            .and_then(|n| q.sorted.get(n))
            .is_some_and(|n| n.noidle);
        let mut enable = q.idle_window;
        if noidle || ttime.is_none() || slice_idle == Duration::ZERO || (!q.deep && q.seeky()) {
            enable = false;
        } else if let Some(t) = ttime.filter(|t| t.valid()) {
            enable = t.mean() <= slice_idle.nanos();
        }
        q.idle_window = enable;
    }

    /// Whether a request for queue `new` should preempt the active queue
    /// (`cfq_should_preempt`).
    fn should_preempt(&self, new: QueueId, r: &Request, now: Instant) -> bool {
        let Some(a) = self.active else { return false };
        let (n, q) = (self.q(new), self.q(a));
        if n.class == WlClass::Idle {
            return false;
        }
        if q.class == WlClass::Idle {
            return true;
        }
        if q.class == WlClass::Rt && n.class != WlClass::Rt {
            return false;
        }
        if is_sync(r) && !q.sync {
            return true;
        }
        if n.group != q.group {
            return false;
        }
        if self.slice_used(a, now) {
            return true;
        }
        if self.serving_type == WlType::SyncNoidle
            && n.wl_type() == WlType::SyncNoidle
            && n.tree
                .is_some_and(|(ti, _, _)| self.groups[n.group].trees[ti].count() == 2)
            && q.sorted.is_empty()
        {
            return true;
        }
        if n.class == WlClass::Rt && q.class != WlClass::Rt {
            return true;
        }
        // Metadata preempts regular I/O (REQ_PRIO, `prio_pending`).
        if r.meta && !q.sorted.iter().any(|p| p.meta) {
            return true;
        }
        if q.sorted.is_empty() && !self.should_idle(a) {
            return true;
        }
        if self.active_task.is_none() || !q.wait_request {
            return false;
        }
        r.sector.abs_diff(self.last_position) <= CLOSE_THR
    }

    /// Queue `id` takes over: the active queue expires keeping its
    /// leftover, `id` goes to the front of its tree with a fresh slice.
    fn preempt_queue(&mut self, id: QueueId, now: Instant) {
        let old_type = self.active.map(|a| self.q(a).wl_type());
        self.expire_active(true, now);
        let (g, ty) = {
            let q = self.q(id);
            (q.group, q.wl_type())
        };
        if old_type != Some(ty) {
            self.groups[g].saved_workload = None;
        }
        debug_assert!(self.q(id).on_rr);
        self.service_tree_add(id, true, now);
        let q = self.qm(id);
        q.slice_end = Instant::ZERO;
        q.slice_new = true;
    }

    // ----- idling -----------------------------------------------------------

    /// Whether to idle on queue `id` when it runs dry (`cfq_should_idle`).
    fn should_idle(&self, id: QueueId) -> bool {
        let q = self.q(id);
        if self.slice_idle == Duration::ZERO || q.class == WlClass::Idle {
            return false;
        }
        if q.idle_window && !self.ncq_flash() {
            return true;
        }
        // Otherwise only the last queue of its tree idles ("idle at the end
        // of the SYNC_NOIDLE tree"), if the tree's think time is short.
        let Some((ti, _, _)) = q.tree else {
            return false;
        };
        let st = &self.groups[q.group].trees[ti];
        st.count() == 1 && q.sync && !Self::thinktime_big(&st.ttime, self.slice_idle)
    }

    /// Arm the idle timer on the active queue, now empty (`cfq_arm_slice_timer`).
    fn arm_slice_timer(&mut self, now: Instant) {
        let Some(a) = self.active else { return };
        if self.ncq_flash() {
            return;
        }
        let mut group_idle = Duration::ZERO;
        if !self.should_idle(a) {
            if self.group_idle == Duration::ZERO {
                return;
            }
            group_idle = self.group_idle;
        }
        let q = self.q(a);
        if q.dispatched > 0 {
            return;
        }
        // The task has exited: nothing will come.
        let Some(ts) = self.active_task.and_then(|t| self.tasks.get(&t)) else {
            return;
        };
        // Think time longer than what is left of the slice: don't idle.
        if ts.ttime.valid() && q.slice_end.since(now).nanos() < ts.ttime.mean() {
            return;
        }
        if group_idle != Duration::ZERO && self.groups[q.group].nr_cfqq > 1 {
            return;
        }
        let wait = if group_idle == Duration::ZERO {
            self.slice_idle
        } else {
            group_idle
        };
        self.qm(a).wait_request = true;
        self.idle_timer = Some(now + wait);
    }

    /// The idle timer fires (`cfq_idle_slice_timer`), run lazily at the
    /// first call after its time, with the time it was due: nothing else
    /// happened in between.
    fn fire_idle_timer(&mut self, now: Instant) {
        let Some(at) = self.idle_timer else { return };
        if at > now {
            return;
        }
        self.idle_timer = None;
        let Some(a) = self.active else { return };
        let q = self.q(a);
        if q.must_dispatch {
            return;
        }
        if !self.slice_used(a, at) {
            if self.busy_queues == 0 || !q.sorted.is_empty() {
                return;
            }
            self.qm(a).deep = false;
        }
        self.expire_active(false, at);
    }

    /// Whether to extend the slice of a group's last queue to keep the
    /// group backlogged (`cfq_should_wait_busy`).
    fn should_wait_busy(&self, id: QueueId, now: Instant) -> bool {
        let q = self.q(id);
        let g = &self.groups[q.group];
        if !q.sorted.is_empty() || g.nr_cfqq > 1 {
            return false;
        }
        if Self::thinktime_big(&g.ttime, self.group_idle) {
            return false;
        }
        if self.slice_used(id, now) {
            return true;
        }
        let left = q.slice_end.since(now);
        if let Some(ts) = self.active_task.and_then(|t| self.tasks.get(&t)) {
            if ts.ttime.valid() && left.nanos() < ts.ttime.mean() {
                return true;
            }
        }
        left <= JIFFY
    }

    // ----- selection -----------------------------------------------------------

    fn set_active(&mut self, id: QueueId, now: Instant) {
        let q = self.qm(id);
        q.slice_start = None;
        q.dispatch_start = now;
        q.allocated_slice = Duration::ZERO;
        q.slice_end = Instant::ZERO;
        q.slice_dispatch = 0;
        q.wait_request = false;
        q.must_dispatch = false;
        q.fifo_checked = false;
        q.slice_new = true;
        self.idle_timer = None;
        self.active = Some(id);
    }

    fn expire_active(&mut self, timed_out: bool, now: Instant) {
        if let Some(a) = self.active {
            self.expire_queue(a, timed_out, now);
        }
    }

    /// End queue `id`'s slice (`__cfq_slice_expired`); `timed_out` keeps
    /// what was left of it for the queue's next key.
    fn expire_queue(&mut self, id: QueueId, timed_out: bool, now: Instant) {
        if self.active == Some(id) {
            self.idle_timer = None;
        }
        {
            let q = self.qm(id);
            q.wait_request = false;
            q.wait_busy = false;
        }
        if timed_out {
            let resid = if self.q(id).slice_new {
                self.scaled_slice(id).nanos() as i64
            } else {
                ns(self.q(id).slice_end) - ns(now)
            };
            self.qm(id).slice_resid = resid;
        }
        let g = self.q(id).group;
        self.group_served(g, id, now);
        if self.q(id).on_rr && self.q(id).sorted.is_empty() {
            self.del_cfqq_rr(id);
        }
        self.resort_rr_list(id, now);
        if self.active == Some(id) {
            self.active = None;
        }
        self.active_task = None;
        self.maybe_free(id);
    }

    /// Another sync, non-seeky queue of the same group and RT-ness with its
    /// next request within 4 MiB of the head (`cfq_close_cooperator`).
    fn close_cooperator(&self, cur: QueueId) -> Option<QueueId> {
        let c = self.q(cur);
        if c.class == WlClass::Idle || !c.sync || c.seeky() {
            return None;
        }
        if self.groups[c.group].nr_cfqq == 1 {
            return None;
        }
        let tree = &self.prio_trees[c.level as usize];
        let pos = self.last_position;
        let after = tree
            .range((pos, QueueId(0))..)
            .find(|&&(_, q)| q != cur)
            .copied();
        let before = tree
            .range(..(pos, QueueId(0)))
            .rev()
            .find(|&&(_, q)| q != cur)
            .copied();
        let (sector, cand) = match (before, after) {
            (Some(b), Some(a)) => {
                if pos - b.0 <= a.0 - pos {
                    b
                } else {
                    a
                }
            }
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => return None,
        };
        if sector.abs_diff(pos) > CLOSE_THR {
            return None;
        }
        let n = self.q(cand);
        if n.group != c.group
            || !n.sync
            || n.seeky()
            || (n.class == WlClass::Rt) != (c.class == WlClass::Rt)
        {
            return None;
        }
        Some(cand)
    }

    /// Pick the workload type: the tree whose first queue has the lowest key.
    fn choose_wl_type(&self, g: usize, class: WlClass) -> WlType {
        let mut best: Option<(i64, WlType)> = None;
        for ty in WL_TYPES {
            if let Some((k, _)) = self.groups[g].trees[tree_index(class, ty)].first() {
                let lower = match best {
                    None => true,
                    Some((bk, _)) => k < bk,
                };
                if lower {
                    best = Some((k, ty));
                }
            }
        }
        best.map_or(WlType::SyncNoidle, |(_, ty)| ty)
    }

    /// Class (RT, then BE, then IDLE) and workload type with its slice
    /// (`choose_wl_class_and_type`).
    fn choose_class_and_type(&mut self, g: usize, now: Instant) {
        let original = self.serving_class;
        let class = if self.busy_wl(g, WlClass::Rt) > 0 {
            WlClass::Rt
        } else if self.busy_wl(g, WlClass::Be) > 0 {
            WlClass::Be
        } else {
            self.serving_class = WlClass::Idle;
            self.workload_expires = Some(now + JIFFY);
            return;
        };
        self.serving_class = class;
        if original == class {
            let count = self.groups[g].trees[tree_index(class, self.serving_type)].count();
            if count > 0 && self.workload_expires.is_some_and(|e| now <= e) {
                return;
            }
        }
        let ty = self.choose_wl_type(g, class);
        self.serving_type = ty;
        let count = u64::from(self.groups[g].trees[tree_index(class, ty)].count());
        // The workload's share of the group slice: its queues over all the
        // class's busy queues.
        let busy = self.groups[g].busy_queues_avg[class as usize].max(self.busy_wl(g, class));
        let mut slice = self.group_slice(g).nanos() * count / u64::from(busy.max(1));
        if ty == WlType::Async {
            let cap = self.target_latency.nanos() * u64::from(self.busy_async(g))
                / u64::from(self.busy_queues.max(1));
            slice = slice.min(cap);
            slice = slice * self.slice[0].nanos() / self.slice[1].nanos();
        } else {
            slice = slice.max(2 * self.slice_idle.nanos());
        }
        let slice = Duration(slice).max(MIN_TT);
        self.workload_expires = Some(now + slice);
    }

    /// The leftmost group, restoring its saved workload state
    /// (`cfq_choose_cfqg`). False if no group is busy.
    fn choose_group(&mut self, now: Instant) -> bool {
        let Some(&(v, _, g)) = self.group_tree.iter().next() else {
            return false;
        };
        self.min_vdisktime = self.min_vdisktime.max(v);
        self.serving_group = g;
        match self.groups[g].saved_workload {
            Some((left, class, ty)) => {
                self.workload_expires = Some(now + left);
                self.serving_type = ty;
                self.serving_class = class;
            }
            None => self.workload_expires = None,
        }
        self.choose_class_and_type(g, now);
        true
    }

    fn next_queue(&self) -> Option<QueueId> {
        if self.rq_queued == 0 {
            return None;
        }
        let g = &self.groups[self.serving_group];
        g.trees[tree_index(self.serving_class, self.serving_type)]
            .first()
            .map(|(_, q)| q)
    }

    /// The grace period an IDLE-class queue waits for: none while it is
    /// over, else until when.
    fn idle_class_wait(&self, now: Instant) -> Option<Instant> {
        if self.nonidle_in_flight > 0 {
            return Some(Instant::NEVER);
        }
        let end = self.last_nonidle_end + IDLE_DELAY;
        (now < end).then_some(end)
    }

    /// Keep the active queue or choose the next (`cfq_select_queue`).
    /// `None`: dispatch nothing now.
    fn select_queue(&mut self, now: Instant) -> Option<QueueId> {
        let mut cooperator = None;
        if let Some(a) = self.active {
            if self.rq_queued == 0 {
                return None;
            }
            let (g, empty, dispatched, wait_busy, must_dispatch) = {
                let q = self.q(a);
                (
                    q.group,
                    q.sorted.is_empty(),
                    q.dispatched,
                    q.wait_busy,
                    q.must_dispatch,
                )
            };
            // Whether to go to the group-idle check (else expire now).
            let check_group_idle = if wait_busy && !empty {
                false
            } else if self.slice_used(a, now) && !must_dispatch {
                // Slice used while idling for the group to get busy: let
                // the last request complete.
                if self.groups[g].nr_cfqq == 1 && empty && dispatched > 0 && self.should_idle(a) {
                    return None;
                }
                true
            } else if !empty {
                return Some(a);
            } else if let Some(c) = self.close_cooperator(a) {
                cooperator = Some(c);
                false
            } else if self.idle_timer.is_some() {
                return None;
            } else {
                // A deep seeky queue on a device faster than it can feed
                // it: stop idling on it.
                let q = self.qm(a);
                if q.seeky()
                    && q.idle_window
                    && (q.slice_new
                        || q.slice_end.since(now)
                            > q.slice_start.map_or(Duration::ZERO, |s| now.since(s)))
                {
                    q.deep = false;
                    q.idle_window = false;
                }
                if dispatched > 0 && self.should_idle(a) {
                    return None;
                }
                true
            };
            if check_group_idle {
                let grp = &self.groups[g];
                if self.group_idle != Duration::ZERO
                    && grp.nr_cfqq == 1
                    && grp.dispatched > 0
                    && !Self::thinktime_big(&grp.ttime, self.group_idle)
                {
                    return None;
                }
            }
            self.expire_active(false, now);
        }
        let next = match cooperator {
            Some(c) => Some(c),
            None => {
                if !self.choose_group(now) {
                    return None;
                }
                if self.serving_class == WlClass::Idle && self.idle_class_wait(now).is_some() {
                    return None;
                }
                self.next_queue()
            }
        };
        if let Some(n) = next {
            self.set_active(n, now);
        }
        next
    }

    /// Whether queue `id` may send another request now (`cfq_may_dispatch`).
    fn may_dispatch(&self, id: QueueId, now: Instant) -> bool {
        let q = self.q(id);
        // Drain async requests before sync I/O that idles.
        if self.should_idle(id) && self.rq_in_flight[0] > 0 {
            return false;
        }
        // Async waits while sync requests are in the driver.
        if self.rq_in_flight[1] > 0 && !q.sync {
            return false;
        }
        let mut max = (self.quantum / 2).max(1);
        if q.class == WlClass::Idle {
            max = 1;
        }
        if q.dispatched >= max {
            if q.class == WlClass::Idle {
                return false;
            }
            // The only sync queue may go deep: it preempts async anyway.
            let promote_sync = q.sync && self.busy_sync_queues == 1;
            let slice_used_soon =
                q.slice_new || now + self.slice_idle.mul(u64::from(q.dispatched)) > q.slice_end;
            if self.busy_queues > 1 && slice_used_soon && !promote_sync {
                return false;
            }
            max = if self.busy_queues == 1 || promote_sync {
                u32::MAX
            } else {
                self.quantum
            };
        }
        // Async depth ramps up with the time since a sync request was
        // last delayed.
        if !q.sync && self.low_latency {
            let since = (ns(now) - self.last_delayed_sync).max(0) as u64;
            let mut depth = (since / self.slice[1].nanos()).min(u64::from(u32::MAX)) as u32;
            if depth == 0 && q.dispatched == 0 {
                depth = 1;
            }
            max = max.min(depth);
        }
        q.dispatched < max
    }

    /// Take `rid` off queue `id` and account it as in the driver.
    fn dispatch_insert(&mut self, id: QueueId, rid: RequestId) -> Request {
        let next = self.find_next_rq(id, rid);
        let q = self.qm(id);
        q.next_rq = next;
        let fifo_time = q
            .fifo_time
            .remove(&rid)
            .expect("queued request has a deadline");
        q.fifo.remove(&(fifo_time, rid));
        let request = q.sorted.remove(rid).expect("queued");
        q.dispatched += 1;
        let (g, sync, class) = (q.group, q.sync, q.class);
        self.rq_queued -= 1;
        self.prio_tree_update(id);
        self.groups[g].dispatched += 1;
        self.rq_in_flight[usize::from(sync)] += 1;
        self.rq_in_driver += 1;
        let nonidle = class != WlClass::Idle;
        if nonidle {
            self.nonidle_in_flight += 1;
        }
        self.last_position = request.end();
        self.in_flight.insert(request.id, (id, nonidle));
        request
    }

    /// Why nothing is dispatched: a wait until the idle timer or the idle
    /// class's grace, until a completion, or nothing at all.
    fn hold(&self, now: Instant) -> Dispatch {
        if self.rq_queued == 0 {
            return Dispatch::Empty;
        }
        if let Some(t) = self.idle_timer {
            return Dispatch::Wait { until: t };
        }
        if self.active.is_none() && self.serving_class == WlClass::Idle {
            if let Some(until) = self.idle_class_wait(now) {
                return Dispatch::Wait { until };
            }
        }
        // Held back for requests in the driver (quantum, sync/async
        // separation, idling on a queue with I/O in flight): a completion
        // will call again.
        debug_assert!(self.rq_in_driver > 0, "holding with nothing in flight");
        Dispatch::Wait {
            until: Instant::NEVER,
        }
    }

    /// Update `hw_tag` from the depth seen in the driver (`cfq_update_hw_tag`).
    fn update_hw_tag(&mut self) {
        self.hw_tag_est_depth = self.hw_tag_est_depth.max(self.rq_in_driver);
        if self.hw_tag == 1 {
            return;
        }
        if self.rq_queued <= HW_QUEUE_MIN as usize && self.rq_in_driver <= HW_QUEUE_MIN {
            return;
        }
        // An idling queue that cannot fill the device says nothing.
        if let Some(a) = self.active {
            let q = self.q(a);
            if q.idle_window
                && q.dispatched as usize + q.sorted.len() < HW_QUEUE_MIN as usize
                && self.rq_in_driver < HW_QUEUE_MIN
            {
                return;
            }
        }
        self.hw_tag_samples += 1;
        if self.hw_tag_samples <= HW_TAG_SAMPLES {
            return;
        }
        self.hw_tag = i8::from(self.hw_tag_est_depth >= HW_QUEUE_MIN);
    }

    /// Whether the device looks like it queues commands (-1: not known yet).
    pub fn hw_tag(&self) -> i8 {
        self.hw_tag
    }
}

impl Scheduler for Cfq {
    fn name(&self) -> &'static str {
        "cfq"
    }

    fn set_groups(&mut self, groups: &GroupTree) {
        self.set_group_tree(groups);
    }

    fn insert(&mut self, request: Request, now: Instant) {
        self.fire_idle_timer(now);
        let sync = is_sync(&request);
        self.tasks.entry(request.task).or_insert(TaskState {
            ttime: Ewma::default(),
            last_end_request: now,
        });
        let id = self.queue_for(&request, sync);
        let rule = self.rule;
        let last_position = self.last_position;
        let q = self.qm(id);
        match q.sorted.merge(request, &rule) {
            MergeOutcome::None(request) => {
                let deadline = now + self.fifo_expire[usize::from(sync)];
                let rid = request.id;
                let info = Request {
                    merged: Vec::new(),
                    ..request.clone()
                };
                let q = self.qm(id);
                q.fifo.insert((deadline, rid));
                q.fifo_time.insert(rid, deadline);
                q.sorted.insert(request);
                self.rq_queued += 1;
                if !self.q(id).on_rr {
                    self.add_cfqq_rr(id, now);
                }
                let prev = self.q(id).next_rq;
                let next = self.choose_req(id, prev, Some(rid), last_position);
                self.qm(id).next_rq = next;
                if next != prev {
                    self.prio_tree_update(id);
                }
                self.rq_enqueued(id, &info, now);
            }
            MergeOutcome::Merged {
                survivor,
                absorbed_queued,
            } => {
                // A bio merge: no new request, no statistics. The survivor
                // keeps the earlier FIFO place of the two.
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
                let prev = self.q(id).next_rq;
                let next = self.choose_req(id, prev, Some(survivor), last_position);
                self.qm(id).next_rq = next;
                self.prio_tree_update(id);
            }
        }
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        self.fire_idle_timer(now);
        if self.busy_queues == 0 {
            return Dispatch::Empty;
        }
        let Some(id) = self.select_queue(now) else {
            return self.hold(now);
        };
        if !self.may_dispatch(id, now) {
            return self.hold(now);
        }
        // The FIFO is looked at once per slice.
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
        let request = self.dispatch_insert(id, rid);
        if self.active_task.is_none() {
            self.active_task = Some(request.task);
        }
        let async_rq = self.slice_async_rq;
        let q = self.qm(id);
        q.slice_dispatch += 1;
        q.must_dispatch = false;
        // An async queue's request budget, `2 × slice_async_rq × (8 −
        // level)`, or an idle queue's single request, ends its slice when
        // others wait.
        let budget = 2 * async_rq * u32::from(IOPRIO_LEVELS - q.level);
        let expire = (!q.sync && q.slice_dispatch >= budget) || q.class == WlClass::Idle;
        if self.busy_queues > 1 && expire {
            self.qm(id).slice_end = now + JIFFY;
            self.expire_active(false, now);
        }
        Dispatch::Request(request)
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        self.fire_idle_timer(now);
        let Some((id, nonidle)) = self.in_flight.remove(&request.id) else {
            debug_assert!(false, "completion of a request cfq did not dispatch");
            return;
        };
        self.update_hw_tag();
        self.rq_in_driver -= 1;
        let (g, qsync, class) = {
            let q = self.qm(id);
            q.dispatched -= 1;
            (q.group, q.sync, q.class)
        };
        self.groups[g].dispatched -= 1;
        self.rq_in_flight[usize::from(qsync)] -= 1;
        if nonidle {
            self.nonidle_in_flight -= 1;
            self.last_nonidle_end = now;
        }
        let sync = is_sync(request);
        if sync {
            if let Some(ts) = self.tasks.get_mut(&request.task) {
                ts.last_end_request = now;
            }
            let q = self.q(id);
            let ti = match q.tree {
                Some((ti, _, _)) => ti,
                None => tree_index(q.class, q.wl_type()),
            };
            self.groups[g].trees[ti].last_end_request = now;
            if request.arrival + self.fifo_expire[1] <= now {
                self.last_delayed_sync = ns(now);
            }
        }
        self.groups[g].last_end_request = now;

        if self.active == Some(id) {
            let empty = self.q(id).sorted.is_empty();
            if self.q(id).slice_new {
                self.set_prio_slice(id, now);
                self.qm(id).slice_new = false;
            }
            if self.should_wait_busy(id, now) {
                let extend = if self.slice_idle == Duration::ZERO {
                    self.group_idle
                } else {
                    self.slice_idle
                };
                let q = self.qm(id);
                q.slice_end = now + extend;
                q.wait_busy = true;
            }
            if self.slice_used(id, now) || class == WlClass::Idle {
                self.expire_queue(id, true, now);
            } else if sync && empty && self.close_cooperator(id).is_none() {
                self.arm_slice_timer(now);
            }
        }
        self.maybe_free(id);
    }

    fn queued(&self) -> usize {
        self.rq_queued
    }

    fn task_exited(&mut self, task: TaskId, now: Instant) {
        self.fire_idle_timer(now);
        self.tasks.remove(&task);
        if let Some(id) = self.sync_queues.remove(&task) {
            self.qm(id).owner = None;
            if self.active == Some(id) {
                self.expire_queue(id, false, now);
            }
            self.maybe_free(id);
        }
    }

    /// None: RT starves BE and IDLE, and IDLE waits for all other I/O (see
    /// the module documentation for what holds with BE alone).
    fn starvation_bound(&self, _service: Duration, _max_queued: usize) -> Option<Duration> {
        None
    }

    /// The invariants of the module docs: a queue is in a service tree
    /// (at the key it remembers) exactly when it is busy, every busy queue
    /// but the active one has requests, the busy counts agree, a group
    /// with busy queues is on the group tree, and `rq_queued` is the
    /// requests in all sorted lists.
    fn check_invariants(&self) -> Result<(), String> {
        let mut queued = 0usize;
        let mut busy = 0u32;
        let mut busy_in = vec![0u32; self.groups.len()];
        for (i, q) in self.queues.iter().enumerate() {
            let Some(q) = q else { continue };
            queued += q.sorted.len();
            let id = QueueId(i as u32);
            match (q.on_rr, q.tree) {
                (true, Some((t, key, seq))) => {
                    busy += 1;
                    busy_in[q.group] += 1;
                    if !self.groups[q.group].trees[t]
                        .queues
                        .contains(&(key, seq, id))
                    {
                        return Err(format!("busy queue {i} is not in tree {t} at key {key}"));
                    }
                    if q.sorted.is_empty() && self.active != Some(id) {
                        return Err(format!("busy queue {i} has no request and is not active"));
                    }
                }
                (false, None) => {}
                (on_rr, tree) => {
                    return Err(format!(
                        "queue {i}: on_rr {on_rr} but service tree {tree:?}"
                    ))
                }
            }
        }
        if queued != self.rq_queued {
            return Err(format!(
                "rq_queued = {} but the queues hold {queued}",
                self.rq_queued
            ));
        }
        if busy != self.busy_queues {
            return Err(format!(
                "busy_queues = {} but {busy} are busy",
                self.busy_queues
            ));
        }
        for (g, group) in self.groups.iter().enumerate() {
            let in_trees: usize = group.trees.iter().map(|t| t.queues.len()).sum();
            if in_trees != busy_in[g] as usize || group.nr_cfqq != busy_in[g] {
                return Err(format!(
                    "group {g}: {in_trees} queues in its trees, nr_cfqq {}, {} busy",
                    group.nr_cfqq, busy_in[g]
                ));
            }
            if group.nr_cfqq > 0 && group.tree_key.is_none() {
                return Err(format!(
                    "group {g} has busy queues but is not on the group tree"
                ));
            }
            if let Some((k, seq)) = group.tree_key {
                if !self.group_tree.contains(&(k, seq, g)) {
                    return Err(format!("group {g} remembers key {k} but is not there"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use elevator_core::IoPrio;

    const MS: u64 = 1_000_000;

    fn at(ms: u64) -> Instant {
        Instant(ms * MS)
    }

    fn read(id: u64, task: u32, sector: Sector, prio: IoPrio) -> Request {
        Request {
            prio,
            ..Request::read(id, task, sector, 64)
        }
    }

    fn take(d: Dispatch) -> Request {
        match d {
            Dispatch::Request(r) => r,
            other => panic!("expected a request, got {other:?}"),
        }
    }

    #[test]
    fn slices_follow_the_kernel_table() {
        let s = Cfq::new(&QueueLimits::default());
        let sync: Vec<u64> = (0..8).map(|l| s.prio_slice(true, l).nanos() / MS).collect();
        let asy: Vec<u64> = (0..8)
            .map(|l| s.prio_slice(false, l).nanos() / MS)
            .collect();
        assert_eq!(sync, vec![180, 160, 140, 120, 100, 80, 60, 40]);
        assert_eq!(asy, vec![72, 64, 56, 48, 40, 32, 24, 16]);
    }

    #[test]
    fn choose_req_prefers_forward_then_short_back_seeks() {
        let mut s = Cfq::new(&QueueLimits::default());
        for (id, sector) in [(1, 10_000), (2, 9_000), (3, 100_000)] {
            s.insert(read(id, 1, sector, IoPrio::be(4)), Instant::ZERO);
        }
        let q = s.sync_queues[&TaskId(1)];
        let pick =
            |s: &Cfq, a, b, last| s.choose_req(q, Some(RequestId(a)), Some(RequestId(b)), last);
        // Head at 9_500: 10_000 is 500 ahead, 9_000 is 500 behind (×2).
        assert_eq!(pick(&s, 1, 2, 9_500), Some(RequestId(1)));
        // Head at 9_200: 800 ahead vs 200 behind ×2 = 400.
        assert_eq!(pick(&s, 1, 2, 9_200), Some(RequestId(2)));
        // Head far beyond both: more than back_seek_max (32768 sectors)
        // behind, both wrap; the lower sector goes first.
        assert_eq!(pick(&s, 1, 2, 200_000), Some(RequestId(2)));
        // One wrapped, one ahead: ahead wins however far.
        assert_eq!(pick(&s, 2, 3, 60_000), Some(RequestId(3)));
    }

    #[test]
    fn rt_before_be_before_idle() {
        let mut s = Cfq::new(&QueueLimits::default());
        s.insert(read(1, 1, 1_000, IoPrio::idle()), Instant::ZERO);
        s.insert(read(2, 2, 2_000, IoPrio::be(0)), Instant::ZERO);
        s.insert(read(3, 3, 3_000, IoPrio::rt(7)), Instant::ZERO);
        let mut t = at(300);
        let mut order = Vec::new();
        for _ in 0..3 {
            // Let idling and the idle-class grace run out between requests.
            let r = loop {
                match s.dispatch(t) {
                    Dispatch::Request(r) => break r,
                    Dispatch::Wait { until } => t = until.min(t + Duration::from_secs(1)),
                    Dispatch::Empty => panic!("requests are queued"),
                }
            };
            order.push(r.id.0);
            t += Duration::from_millis(5);
            s.complete(&r, t);
        }
        assert_eq!(order, vec![3, 2, 1]);
    }

    #[test]
    fn idle_class_waits_for_the_grace_period() {
        let mut s = Cfq::new(&QueueLimits::default());
        s.insert(read(1, 1, 1_000, IoPrio::be(4)), at(1_000));
        let r = take(s.dispatch(at(1_000)));
        s.complete(&r, at(1_010));
        s.task_exited(TaskId(1), at(1_010));
        s.insert(read(2, 2, 5_000, IoPrio::idle()), at(1_020));
        assert_eq!(s.dispatch(at(1_020)), Dispatch::Wait { until: at(1_210) });
        assert!(matches!(s.dispatch(at(1_210)), Dispatch::Request(r) if r.id.0 == 2));
    }

    #[test]
    fn idles_on_a_sync_queue_and_resumes_on_its_next_request() {
        let mut s = Cfq::new(&QueueLimits::default());
        s.insert(read(1, 1, 1_000, IoPrio::be(4)), Instant::ZERO);
        let r = take(s.dispatch(Instant::ZERO));
        s.complete(&r, at(5));
        // Another task's far-away request must wait for the idle window.
        s.insert(read(2, 2, 900_000, IoPrio::be(4)), at(6));
        assert_eq!(s.dispatch(at(6)), Dispatch::Wait { until: at(13) });
        // The idling task comes back within the window: served at once.
        s.insert(read(3, 1, 1_064, IoPrio::be(4)), at(7));
        assert_eq!(take(s.dispatch(at(7))).id.0, 3);
    }

    #[test]
    fn the_idle_window_runs_out_and_the_next_queue_is_served() {
        let mut s = Cfq::new(&QueueLimits::default());
        s.insert(read(1, 1, 1_000, IoPrio::be(4)), Instant::ZERO);
        let r = take(s.dispatch(Instant::ZERO));
        s.complete(&r, at(5));
        s.insert(read(2, 2, 900_000, IoPrio::be(4)), at(6));
        assert_eq!(s.dispatch(at(6)), Dispatch::Wait { until: at(13) });
        assert_eq!(take(s.dispatch(at(13))).id.0, 2);
    }

    #[test]
    fn rt_preempts_an_idling_be_queue() {
        let mut s = Cfq::new(&QueueLimits::default());
        s.insert(read(1, 1, 1_000, IoPrio::be(0)), Instant::ZERO);
        let r = take(s.dispatch(Instant::ZERO));
        s.complete(&r, at(5));
        s.insert(read(2, 2, 900_000, IoPrio::rt(7)), at(6));
        assert_eq!(take(s.dispatch(at(6))).id.0, 2);
    }

    #[test]
    fn sync_waits_for_async_in_the_driver_to_drain() {
        let mut s = Cfq::new(&QueueLimits::default());
        s.insert(Request::write(1, 1, 50_000, 64), Instant::ZERO);
        let w = take(s.dispatch(Instant::ZERO));
        // A read preempts the async queue but does not join a write in the
        // driver.
        s.insert(read(2, 2, 1_000, IoPrio::be(4)), at(1));
        assert_eq!(
            s.dispatch(at(1)),
            Dispatch::Wait {
                until: Instant::NEVER
            }
        );
        s.complete(&w, at(3));
        assert_eq!(take(s.dispatch(at(3))).id.0, 2);
    }

    #[test]
    fn async_waits_while_sync_is_in_the_driver() {
        let mut s = Cfq::new(&QueueLimits::default());
        s.insert(read(1, 1, 1_000, IoPrio::be(4)), Instant::ZERO);
        s.insert(Request::write(2, 2, 50_000, 64), Instant::ZERO);
        let r = take(s.dispatch(Instant::ZERO));
        assert_eq!(r.id.0, 1);
        // The reader's queue idles with its read in flight; the write waits.
        assert_eq!(
            s.dispatch(at(1)),
            Dispatch::Wait {
                until: Instant::NEVER
            }
        );
        s.complete(&r, at(4));
        assert!(matches!(s.dispatch(at(4)), Dispatch::Wait { .. }));
        // After the idle window the write goes.
        assert_eq!(take(s.dispatch(at(12))).id.0, 2);
    }

    #[test]
    fn an_expired_request_is_served_first_in_a_new_slice() {
        // Task 1's queue: an old request far out, a newer one near the head.
        let mut s = Cfq::new(&QueueLimits::default());
        s.insert(read(1, 1, 500_000, IoPrio::be(4)), Instant::ZERO);
        s.insert(read(2, 1, 1_000, IoPrio::be(4)), at(1));
        assert_eq!(take(s.dispatch(at(200))).id.0, 1);
        let mut s = Cfq::new(&QueueLimits::default());
        s.insert(read(1, 1, 500_000, IoPrio::be(4)), Instant::ZERO);
        s.insert(read(2, 1, 1_000, IoPrio::be(4)), at(1));
        assert_eq!(take(s.dispatch(at(2))).id.0, 2);
    }

    #[test]
    fn merges_stay_within_a_queue() {
        let mut s = Cfq::new(&QueueLimits::default());
        s.insert(read(1, 1, 0, IoPrio::be(4)), Instant::ZERO);
        s.insert(read(2, 2, 64, IoPrio::be(4)), Instant::ZERO);
        assert_eq!(s.queued(), 2);
        s.insert(read(3, 1, 64 + 64 + 1000, IoPrio::be(4)), Instant::ZERO);
        s.insert(read(4, 1, 64, IoPrio::be(4)), Instant::ZERO);
        // 4 joins 1 (same task), not 2; async writes of two tasks in the
        // same class share a queue and merge.
        assert_eq!(s.queued(), 3);
        s.insert(Request::write(5, 3, 9_000, 8), Instant::ZERO);
        s.insert(Request::write(6, 4, 9_008, 8), Instant::ZERO);
        assert_eq!(s.queued(), 4);
    }

    #[test]
    fn detects_command_queueing_from_the_depth_it_sees() {
        use crate::harness::{Case, Layout, Options, Phase, Run, TaskScript, REGION};
        // A reader keeping 10 requests in the system, 1000 sectors apart,
        // on a 32-deep driver completing one a millisecond: CFQ sees a
        // depth of 10, never the 32 the limits allow.
        let limits = QueueLimits {
            queue_depth: 32,
            ..QueueLimits::default()
        };
        let reads = Phase::reads(100, 64, Layout::Strided { stride: 1_000 });
        let reader = TaskScript {
            outstanding: 10,
            ..TaskScript::new(1, REGION, vec![reads])
        };
        let case = Case::serial(vec![reader], limits, Duration::from_millis(1));
        let mut run = Run::new(Box::new(Cfq::new(&limits)), &case, &Options::default());
        // Undecided while the first requests go out.
        run.run_until(Instant::ZERO).unwrap();
        assert_eq!(run.policy().hw_tag(), -1);
        run.run_until(at(60)).unwrap();
        assert_eq!(run.policy().hw_tag(), 1);
        run.run_to_end().unwrap();
        run.finish().unwrap();
    }

    /// Closed-loop sequential readers of 64 sectors (think time zero, one
    /// request each) on the harness's serial device, depth 1, every request
    /// served in `service`, from time zero to `end`: requests each task got.
    fn run_readers(prios: &[IoPrio], service: Duration, end: Instant) -> Vec<u64> {
        let groups = vec![GroupId::ROOT; prios.len()];
        run_grouped_readers(
            Cfq::new(&QueueLimits::default()),
            prios,
            &groups,
            service,
            end,
        )
    }

    /// The same with task `i` in `groups[i]`, under `s`. Task ids count
    /// from 0; every wait stays within CFQ's starvation bound (checked).
    fn run_grouped_readers(
        s: Cfq,
        prios: &[IoPrio],
        groups: &[GroupId],
        service: Duration,
        end: Instant,
    ) -> Vec<u64> {
        use crate::harness::{Case, Layout, Options, Phase, Run, TaskScript, REGION};
        let tasks = (0..prios.len() as u32)
            .map(|i| {
                // 8 M sectors apart: 17 readers fit the default 80 GB.
                let base = REGION + u64::from(i) * 8_000_000;
                let reads = Phase::reads(u32::MAX, 64, Layout::Sequential);
                TaskScript {
                    prio: prios[i as usize],
                    group: groups[i as usize],
                    ..TaskScript::new(i, base, vec![reads])
                }
            })
            .collect();
        let case = Case::serial(tasks, QueueLimits::default(), service);
        let mut run = Run::new(Box::new(s), &case, &Options::default());
        let checked = run.run_until(end).and_then(|()| run.finish());
        checked.unwrap_or_else(|v| panic!("{v}"));
        (0..prios.len() as u32)
            .map(|i| run.stats(TaskId(i)).requests())
            .collect()
    }

    #[test]
    fn be_levels_share_time_in_the_ratio_of_their_slices() {
        let done = run_readers(
            &[IoPrio::be(0), IoPrio::be(7)],
            Duration::from_millis(2),
            at(20_000),
        );
        let ratio = done[0] as f64 / done[1] as f64;
        println!(
            "be/0 {} requests, be/7 {} requests, ratio {ratio:.2} (slices 180:40 = 4.5)",
            done[0], done[1]
        );
        assert!((4.0..5.0).contains(&ratio), "{ratio}");
    }

    #[test]
    fn rt_takes_the_disk_with_shares_falling_by_level() {
        let mut prios: Vec<IoPrio> = (0..8).map(IoPrio::rt).collect();
        prios.extend((0..8).map(IoPrio::be));
        prios.push(IoPrio::idle());
        let done = run_readers(&prios, Duration::from_millis(2), at(30_000));
        println!("requests served per task (rt0..7, be0..7, idle): {done:?}");
        let rt = &done[..8];
        assert!(rt.iter().all(|&n| n > 0), "an RT level got nothing: {rt:?}");
        assert!(
            rt.windows(2).all(|w| w[0] > w[1]),
            "RT shares do not fall: {rt:?}"
        );
        assert!(
            done[8..].iter().all(|&n| n == 0),
            "BE/IDLE got disk time: {done:?}"
        );
    }

    #[test]
    fn groups_share_the_disk_by_weight() {
        let mut tree = GroupTree::default();
        let heavy = tree.add("heavy", GroupId::ROOT, 200, Default::default());
        let light = tree.add("light", GroupId::ROOT, 100, Default::default());
        let mut s = Cfq::new(&QueueLimits::default());
        s.set_group_tree(&tree);
        let prios = [IoPrio::be(4), IoPrio::be(4)];
        let done = run_grouped_readers(
            s,
            &prios,
            &[heavy, light],
            Duration::from_millis(2),
            at(20_000),
        );
        let ratio = done[0] as f64 / done[1] as f64;
        println!(
            "weight 200 group: {} requests, weight 100 group: {} requests, ratio {ratio:.2}",
            done[0], done[1]
        );
        assert!((1.7..2.3).contains(&ratio), "{ratio}");
        // Same weights: even shares.
        let mut tree = GroupTree::default();
        let a = tree.add("a", GroupId::ROOT, 100, Default::default());
        let b = tree.add("b", GroupId::ROOT, 100, Default::default());
        let mut s = Cfq::new(&QueueLimits::default());
        s.set_group_tree(&tree);
        let done = run_grouped_readers(s, &prios, &[a, b], Duration::from_millis(2), at(20_000));
        let ratio = done[0] as f64 / done[1] as f64;
        assert!((0.9..1.1).contains(&ratio), "{ratio}");
    }
}
