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

use super::cfq_common::{
    self, Fifo, Settings, CLOSE_THR, HW_QUEUE_MIN, HW_TAG_SAMPLES, JIFFY, MIN_TT, SLICE_SCALE,
};
use crate::queue::MergeOutcome;
use crate::stats::{Ewma, SeekHistory};
use crate::{Dispatch, MergeRule, Scheduler, SchedulerType, SortedQueue, Tunable, Tunables};
use elevator_core::{
    Duration, GroupId, GroupTree, Instant, IoClass, Op, QueueLimits, Request, RequestId, Sector,
    TaskId, IOPRIO_LEVELS,
};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

mod groups;
mod idle;
mod select;

/// Requests a queue may have in the driver per round (`cfq_quantum`): 8 in
/// 2.6.33 and later (3.10 source); 2.6.2x sources read 4. Whether 2.6.32
/// itself had 4 or 8 is unverified.
pub const QUANTUM: i64 = 8;
pub use super::cfq_common::{
    BACK_SEEK_MAX_KIB, BACK_SEEK_PENALTY, FIFO_EXPIRE_ASYNC_MS, FIFO_EXPIRE_SYNC_MS, LOW_LATENCY,
    SLICE_ASYNC_MS, SLICE_ASYNC_RQ, SLICE_IDLE_MS, SLICE_SYNC_MS,
};
/// Idling wait for a group's next request, HZ/125 (`cfq_group_idle`, 2.6.37+).
pub const GROUP_IDLE_MS: i64 = 8;
/// Round length low_latency aims for, 300 ms (`cfq_target_latency`, 3.x).
pub const TARGET_LATENCY_MS: i64 = 300;

/// Weight of a group when no group tree was given: `io.weight`'s default
/// (elevator-core). The kernel's blkio default was 500 (root 1000).
pub const GROUP_WEIGHT_DEFAULT: u32 = elevator_core::DEFAULT_WEIGHT;

const HZ: i64 = 1_000_000_000;
/// Idle-class grace and group/idle-queue push-back, HZ/5 (`CFQ_IDLE_DELAY`).
const IDLE_DELAY: Duration = Duration::from_millis(200);
/// Fixed-point shift of group fractions (`CFQ_SERVICE_SHIFT`).
const SERVICE_SHIFT: u32 = 12;
/// A request further than this from the previous one is a seek (`CFQQ_SEEK_THR`).
const SEEK_THR: Sector = 8 * 100;
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

/// CFQ's common tunables ([`cfq_common::tunables`]) with 3.x's `quantum`
/// and `low_latency` (slice scaling as well as the async ramp), and
/// `group_idle` (2.6.37) after `slice_idle` and `target_latency` (3.x) last,
/// as sysfs lists them.
const TUNABLES: [Tunable; 12] = {
    let common = cfq_common::tunables(
        QUANTUM,
        "requests a queue may have in the driver in one round",
        "scale slices to target_latency and ramp async depth",
    );
    let mut all = [common[0]; 12];
    let mut i = 1;
    while i < 9 {
        all[i] = common[i];
        i += 1;
    }
    all[9] = Tunable {
        name: "group_idle",
        default: GROUP_IDLE_MS,
        unit: "ms",
        about: "idle wait for a group's next request",
    };
    all[10] = common[9];
    all[11] = Tunable {
        name: "target_latency",
        default: TARGET_LATENCY_MS,
        unit: "ms",
        about: "round length low_latency aims for",
    };
    all
};

pub const TYPE: SchedulerType = SchedulerType {
    name: "cfq",
    aliases: &["cfq-iosched"],
    about:
        "per-task queues with time slices by I/O priority, idling, groups (Linux 2.6.33-3.x CFQ)",
    honours: &["ioprio", "weights", "groups"],
    tunables: &TUNABLES,
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
    /// The task of a sync queue, until it exits.
    owner: Option<TaskId>,
    group: usize,
    class: WlClass,
    level: u8,
    sync: bool,
    sorted: SortedQueue,
    fifo: Fifo,
    next_rq: Option<RequestId>,
    /// Busy: in a service tree.
    on_rr: bool,
    /// (tree index, key, sequence) while in a service tree.
    tree: Option<(usize, i64, u64)>,
    /// (level, sector) in the close-cooperator trees.
    prio_key: Option<(u8, Sector)>,
    dispatch_start: Instant,
    /// `cfq-v10`: a charge left open at expiry, from this selection until
    /// the queue's reads in the driver complete.
    charge_from: Option<Instant>,
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
            owner,
            group,
            class,
            level,
            sync,
            sorted: SortedQueue::new(),
            fifo: Fifo::default(),
            next_rq: None,
            on_rr: false,
            tree: None,
            prio_key: None,
            dispatch_start: Instant::ZERO,
            charge_from: None,
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
    /// The registered name (`cfq`, or a variant's).
    name: &'static str,
    /// Charge a queue expired before its first completion the disk time of
    /// its reads in flight, at their completion (`cfq-v10`, `cfq_v10.rs`).
    charge_in_flight: bool,
    /// The settings every CFQ has (`quantum` to `slice_idle`, `low_latency`).
    conf: Settings,
    group_idle: Duration,
    target_latency: Duration,
    rule: MergeRule,
    rotational: bool,

    tasks: FxHashMap<TaskId, TaskState>,
    sync_queues: FxHashMap<TaskId, QueueId>,
    async_queues: FxHashMap<(u8, u8), QueueId>,
    queues: Vec<Option<CfqQueue>>,
    free: Vec<QueueId>,
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
            name: TYPE.name,
            charge_in_flight: false,
            conf: Settings::read(t),
            group_idle: ms("group_idle"),
            target_latency: ms("target_latency").max(JIFFY),
            rule: cfq_common::merge_rule(limits),
            rotational: limits.rotational,
            tasks: FxHashMap::default(),
            sync_queues: FxHashMap::default(),
            async_queues: FxHashMap::default(),
            queues: Vec::new(),
            free: Vec::new(),
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

    /// The `cfq-v10` variant: a queue expired while its reads are in the
    /// driver, before its first completion, charges its group from its
    /// selection to their completion (see `cfq_v10.rs`).
    pub fn charging_reads_in_flight(mut self, name: &'static str) -> Self {
        self.name = name;
        self.charge_in_flight = true;
        self
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
        let base = self.conf.slice[usize::from(sync)].nanos() as i64;
        let s = base + base / SLICE_SCALE * (4 - i64::from(level));
        Duration(s.max(0) as u64)
    }

    fn iops_mode(&self) -> bool {
        self.conf.slice_idle == Duration::ZERO && self.hw_tag != 0
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

    /// The slice a queue gets now: its level's, scaled to `target_latency`
    /// under `low_latency` when its class has many busy queues.
    fn scaled_slice(&mut self, id: QueueId) -> Duration {
        let (sync, level, class, g) = {
            let q = self.q(id);
            (q.sync, q.level, q.class, q.group)
        };
        let mut slice = self.prio_slice(sync, level).nanos();
        if self.conf.low_latency {
            // The kernel indexes with "is RT": IDLE queues count BE's.
            let avg_class = if class == WlClass::Rt {
                WlClass::Rt
            } else {
                WlClass::Be
            };
            let iq = u64::from(self.group_avg_queues(g, avg_class));
            let sync_slice = self.conf.slice[1].nanos();
            let expect = sync_slice * iq;
            let group_slice = self.group_slice(g).nanos();
            if expect > group_slice {
                let base_low = 2 * self.conf.slice_idle.nanos();
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

    /// Make `candidate`, newly queued or grown by a merge, queue `id`'s
    /// next request if the elevator prefers it from `last`
    /// (`cfq_choose_req`); whether the next request changed.
    fn offer_next(&mut self, id: QueueId, candidate: RequestId, last: Sector) -> bool {
        let back_seek = self.conf.back_seek;
        let q = self.qm(id);
        let before = q.next_rq;
        q.next_rq = cfq_common::choose_req(&q.sorted, &back_seek, before, Some(candidate), last);
        q.next_rq != before
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
        let free = self.free.pop().map(|id| id.0);
        QueueId(cfq_common::slab_insert(&mut self.queues, free, q))
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
            let level = cfq_common::async_level(r.prio, level);
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
        let limit = self.conf.slice_idle.mul(2);
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

    // ----- idling -----------------------------------------------------------

    // ----- selection -----------------------------------------------------------

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
        let mut max = (self.conf.quantum / 2).max(1);
        if q.class == WlClass::Idle {
            max = 1;
        }
        if q.dispatched >= max {
            if q.class == WlClass::Idle {
                return false;
            }
            // The only sync queue may go deep: it preempts async anyway.
            let promote_sync = q.sync && self.busy_sync_queues == 1;
            let slice_used_soon = q.slice_new
                || now + self.conf.slice_idle.mul(u64::from(q.dispatched)) > q.slice_end;
            if self.busy_queues > 1 && slice_used_soon && !promote_sync {
                return false;
            }
            max = if self.busy_queues == 1 || promote_sync {
                u32::MAX
            } else {
                self.conf.quantum
            };
        }
        // Async depth ramps up with the time since a sync request was
        // last delayed.
        if !q.sync && self.conf.low_latency {
            let since = (ns(now) - self.last_delayed_sync).max(0) as u64;
            let mut depth = (since / self.conf.slice[1].nanos()).min(u64::from(u32::MAX)) as u32;
            if depth == 0 && q.dispatched == 0 {
                depth = 1;
            }
            max = max.min(depth);
        }
        q.dispatched < max
    }

    /// Take `rid` off queue `id` and account it as in the driver.
    fn dispatch_insert(&mut self, id: QueueId, rid: RequestId) -> Request {
        let back_seek = self.conf.back_seek;
        let q = self.qm(id);
        q.next_rq = cfq_common::find_next_rq(&q.sorted, &back_seek, rid);
        q.fifo.remove(rid);
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
        self.name
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
                let deadline = now + self.conf.fifo_expire[usize::from(sync)];
                let rid = request.id;
                let q = self.qm(id);
                let info = cfq_common::enqueue(&mut q.sorted, &mut q.fifo, request, deadline);
                self.rq_queued += 1;
                if !self.q(id).on_rr {
                    self.add_cfqq_rr(id, now);
                }
                if self.offer_next(id, rid, last_position) {
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
                    self.rq_queued -= 1;
                    let q = self.qm(id);
                    q.fifo.absorb(gone, survivor, &mut q.next_rq);
                }
                self.offer_next(id, survivor, last_position);
                self.prio_tree_update(id);
            }
        }
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        self.fire_idle_timer(now);
        if self.busy_queues == 0 {
            return Dispatch::Empty;
        }
        let id = match self.select_queue(now) {
            Some(id) if self.may_dispatch(id, now) => id,
            _ => return self.hold(now),
        };
        // The FIFO is looked at once per slice; else the elevator's next.
        let q = self.qm(id);
        let rid = q
            .fifo
            .expired_once(&mut q.fifo_checked, now)
            .or(q.next_rq)
            .expect("a selected queue has requests");
        let request = self.dispatch_insert(id, rid);
        if self.active_task.is_none() {
            self.active_task = Some(request.task);
        }
        let async_rq = self.conf.slice_async_rq;
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
        if self.q(id).dispatched == 0 {
            if let Some(since) = self.qm(id).charge_from.take() {
                self.charge_group(g, now.since(since));
            }
        }
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
            if request.arrival + self.conf.fifo_expire[1] <= now {
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
                let extend = if self.conf.slice_idle == Duration::ZERO {
                    self.group_idle
                } else {
                    self.conf.slice_idle
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

    /// None: RT starves BE and IDLE, and IDLE waits for all other I/O (see
    /// the module documentation for what holds with BE alone).
    fn starvation_bound(&self, _service: Duration, _max_queued: usize) -> Option<Duration> {
        None
    }

    fn task_exited(&mut self, task: TaskId, now: Instant) {
        self.fire_idle_timer(now);
        self.tasks.remove(&task);
        let Some(id) = self.sync_queues.remove(&task) else {
            return;
        };
        self.qm(id).owner = None;
        if self.active == Some(id) {
            self.expire_queue(id, false, now);
        }
        self.maybe_free(id);
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
mod tests;
