//! bfq: Budget Fair Queueing.
//!
//! BFQ as in Linux 4.12 – 6.x (block/bfq-iosched.c, bfq-wf2q.c,
//! Documentation/block/bfq-iosched.rst), the v7r11 design of the 2016
//! patch series; papers: Valente & Checconi, "High throughput disk
//! scheduling with fair bandwidth distribution" (IEEE ToC 2010) for the
//! engine, Valente & Andreolini, "Improving application responsiveness
//! with the BFQ disk I/O scheduler" (SYSTOR 2012) for weight raising.
//! Later additions are tunables, off in `bfq` (the 4.12 model the 2016
//! letter's tables were calibrated on) and on in the `bfq-6.1` preset:
//! `limit_depth` (4.16's tag shares for async I/O and sync writes, applied
//! here as caps on what the device holds), `injection` (4.20/5.2: while
//! idling for the in-service queue, send other queues' requests while
//! fewer than its learned inject limit are in the device), `waker`
//! (5.4/5.14), `stable_merge` (5.13) and `rules = 601` (6.1's idling,
//! symmetry and preemption rules, and the per-queue tag share); see
//! `modern`.
//!
//! Each task gets a sync queue; async writes share one queue per (group,
//! class, level). A queue has a weight (`(8 - level) × 10` from its ioprio)
//! and, when scheduled, a *budget* in sectors. The in-service queue is
//! served exclusively until it exhausts its budget, empties (perhaps after
//! idling up to `slice_idle` for its next request), or exceeds its budget
//! timeout (`timeout_sync`); then B-WF2Q+ (`wf2q`) picks the next queue:
//! the eligible one with the smallest virtual finish time, per class in
//! strict order RT > BE > IDLE. Because queues are charged in sectors,
//! bandwidth (not time) is shared by weight; slow or seeky queues are
//! charged for the time they held the disk instead, so they cannot drag
//! throughput down.
//!
//! Around the engine:
//! - budgets adapt per queue to the reason it expired, and `max_budget`
//!   follows the peak rate that `peak` estimates (`timeout_sync` worth of
//!   sectors);
//! - idling happens only where it pays: for throughput on rotational or
//!   non-queueing devices with sequential, I/O-bound, short-think queues,
//!   or for guarantees when weights/classes differ or a raised queue waits
//!   (never for seeky queues on NCQ flash when all is symmetric); NCQ is
//!   detected from the observed depth;
//! - weight raising (`low_latency`): a queue that becomes busy after long
//!   idleness is raised ×30 for a duration derived from the peak rate, and
//!   one whose arrivals stay under 7000 sectors/s is raised as soft
//!   real-time, renewed each time it qualifies;
//! - bursts of queue creations (8 within 180 ms of each other) are not
//!   raised; tasks doing interleaved sequential I/O close to each other
//!   have their queues merged, and split again when the merge turns seeky;
//! - groups ([`Bfq::set_group`]) are entities of the same B-WF2Q+ at each
//!   level of the hierarchy.
//!
//! Invariants: every queued request is in exactly one queue's sorted set;
//! a queue is busy (scheduled) iff it has requests or is in service or was
//! kept for guarantees; at most one queue is in service and `Wait` is only
//! returned while it idles or waits for its own completions; `max_budget`
//! is derived from the estimate when the tunable is 0.
//!
//! Starvation bound: none. The RT class starves BE and IDLE for as long as
//! it has work (the kernel's strict class order), so no bound holds for an
//! arbitrary mix of priorities. Within one class, a backlogged queue waits
//! at most for the other queues' budgets in proportion to the weights,
//! plus one request's FIFO expiry.

mod modern;
mod peak;
mod wf2q;

use crate::queue::MergeOutcome;
use crate::stats::Ewma;
use crate::{
    BackSeek, Dispatch, MergeRule, Scheduler, SchedulerType, SortedQueue, Tunable, Tunables,
};
use elevator_core::{
    Duration, GroupId, GroupTree, Instant, IoClass, IoPrio, QueueLimits, Request, RequestId,
    Sector, TaskId, IOPRIO_LEVELS,
};
use peak::{rq_seeky, PeakRate, MIN_TT, RATE_SHIFT, SECT_THR_NONROT};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{BTreeMap, VecDeque};
use wf2q::{Class, EntityId, Place, SchedId, Wf2q, ROOT};

// ---------------------------------------------------------------------------
// Tunables (sysfs names and defaults of bfq-iosched.c).
// ---------------------------------------------------------------------------

/// Idle at most 8 ms for the in-service queue's next request
/// (`bfq_slice_idle = NSEC_PER_SEC / 125`).
pub const SLICE_IDLE_MS: i64 = 8;
/// The same in µs (`slice_idle_us`); when set, it wins over `slice_idle`.
pub const SLICE_IDLE_US: i64 = 8_000;
/// Backward seeks up to 16 MiB are taken (`bfq_back_max = 16 * 1024` KiB).
pub const BACK_SEEK_MAX_KIB: i64 = 16 * 1024;
/// ... at twice the cost of a forward seek (`bfq_back_penalty = 2`).
pub const BACK_SEEK_PENALTY: i64 = 2;
/// A sync request is served ahead of sector order after 125 ms
/// (`bfq_fifo_expire[1] = NSEC_PER_SEC / 8`).
pub const FIFO_EXPIRE_SYNC_MS: i64 = 125;
/// ... an async one after 250 ms (`bfq_fifo_expire[0] = NSEC_PER_SEC / 4`).
pub const FIFO_EXPIRE_ASYNC_MS: i64 = 250;
/// A queue may hold the disk for 125 ms per budget (`bfq_timeout = HZ / 8`).
pub const TIMEOUT_SYNC_MS: i64 = 125;
/// 0: derive the maximum budget from the peak rate (`bfq_user_max_budget`).
pub const MAX_BUDGET: i64 = 0;
/// Weight raising on (`low_latency = true` in `bfq_init_queue`).
pub const LOW_LATENCY: i64 = 1;
/// Idle only where it pays (`strict_guarantees = 0`).
pub const STRICT_GUARANTEES: i64 = 0;
/// Tag-depth limits for async I/O and sync writes (`bfq_limit_depth`,
/// Linux 4.16, "block, bfq: limit tags for writes and async I/O"; the
/// version from the kernel's history, not from our reference digest). Off
/// by default here: this model is calibrated as 4.12's, and the media
/// player scenario misses frames on `sata-hdd` with it on (not yet
/// understood). 1 turns the 4.16+ behaviour on.
pub const LIMIT_DEPTH: i64 = 0;
/// I/O injection while idling (`bfq_choose_bfqq_for_injection`, Linux
/// 4.20 "block, bfq: inject other-queue I/O into seeky idle queues on NCQ
/// flash", reworked in 5.2 with the learned `inject_limit`; versions from
/// the kernel's history). Off by default for the same reason; 1 turns it
/// on, with the limit learned as 5.2+ learns it (`modern`).
pub const INJECTION: i64 = 0;

/// Which kernel's idling, symmetry and preemption rules to follow: 412
/// for 4.12 – 4.19 (this model's calibration), 601 for 6.1
/// (`idling_needed_for_service_guarantees` also plugs for a queue that is
/// the only busy one, `bfq_asymmetric_scenario` exempts the lightest queue
/// and counts groups only from two, a newly busy queue preempts one that
/// would not idle, think time is short below `slice_idle / 2`, and
/// `bfq_limit_depth` also trims a queue that holds more than its weight's
/// share of the tags to depth 1, `bfqq_request_over_limit`).
pub const RULES: i64 = 412;
/// Waker/woken detection (`bfq_check_waker`): off here, on in `bfq-6.1`.
/// Introduced in Linux 5.4 ("block, bfq: detect wakers and
/// unconditionally inject their I/O"); the three detections within
/// `128 × slice_idle` modelled here are Jan Kara's 5.14 rework ("bfq:
/// Improve waker detection"), as 6.1 has it.
pub const WAKER: i64 = 0;
/// Stable merging of queues created close together
/// (`bfq_do_or_sched_stable_merge`, `bfq_setup_stable_merge`): off here,
/// on in `bfq-6.1`. Introduced in Linux 5.13 ("block, bfq: merge bursts
/// of newly-created queues").
pub const STABLE_MERGE: i64 = 0;

/// Defaults that differ between the presets.
struct Preset {
    rules: i64,
    limit_depth: i64,
    injection: i64,
    waker: i64,
    stable_merge: i64,
}

/// The tunables with a preset's defaults.
const fn tunables(p: Preset) -> [Tunable; 15] {
    [
        Tunable {
            name: "slice_idle",
            default: SLICE_IDLE_MS,
            unit: "ms",
            about: "how long to idle for the in-service queue's next request",
        },
        Tunable {
            name: "slice_idle_us",
            default: SLICE_IDLE_US,
            unit: "us",
            about: "slice_idle in microseconds (used when it differs from slice_idle)",
        },
        Tunable {
            name: "back_seek_max",
            default: BACK_SEEK_MAX_KIB,
            unit: "KiB",
            about: "longest backward seek taken in sector order",
        },
        Tunable {
            name: "back_seek_penalty",
            default: BACK_SEEK_PENALTY,
            unit: "factor",
            about: "cost of a backward seek relative to a forward one",
        },
        Tunable {
            name: "fifo_expire_sync",
            default: FIFO_EXPIRE_SYNC_MS,
            unit: "ms",
            about: "age after which a sync request is served ahead of sector order",
        },
        Tunable {
            name: "fifo_expire_async",
            default: FIFO_EXPIRE_ASYNC_MS,
            unit: "ms",
            about: "age after which an async request is served ahead of sector order",
        },
        Tunable {
            name: "timeout_sync",
            default: TIMEOUT_SYNC_MS,
            unit: "ms",
            about: "budget timeout: longest service slot of a queue",
        },
        Tunable {
            name: "max_budget",
            default: MAX_BUDGET,
            unit: "sectors",
            about: "largest budget; 0 derives it from the estimated peak rate",
        },
        Tunable {
            name: "low_latency",
            default: LOW_LATENCY,
            unit: "bool",
            about: "raise the weight of interactive and soft real-time queues",
        },
        Tunable {
            name: "strict_guarantees",
            default: STRICT_GUARANTEES,
            unit: "bool",
            about: "always idle and keep one request in the device, for exact guarantees",
        },
        Tunable {
            name: "limit_depth",
            default: p.limit_depth,
            unit: "bool",
            about: "cap async I/O and sync writes in flight (bfq_limit_depth, 4.16+)",
        },
        Tunable {
            name: "injection",
            default: p.injection,
            unit: "bool",
            about: "serve other queues' I/O while idling for the in-service one (5.2+)",
        },
        Tunable {
            name: "rules",
            default: p.rules,
            unit: "version",
            about: "idling, symmetry and preemption rules of 4.12 (412) or 6.1 (601)",
        },
        Tunable {
            name: "waker",
            default: p.waker,
            unit: "bool",
            about: "detect waker queues and inject their I/O first (5.4, 5.14 form)",
        },
        Tunable {
            name: "stable_merge",
            default: p.stable_merge,
            unit: "bool",
            about: "merge sync queues created within 180 ms of each other (5.13+)",
        },
    ]
}

const TUNABLES: [Tunable; 15] = tunables(Preset {
    rules: RULES,
    limit_depth: LIMIT_DEPTH,
    injection: INJECTION,
    waker: WAKER,
    stable_merge: STABLE_MERGE,
});

/// 6.1's defaults: every addition on, as the kernel has them.
const TUNABLES_61: [Tunable; 15] = tunables(Preset {
    rules: 601,
    limit_depth: 1,
    injection: 1,
    waker: 1,
    stable_merge: 1,
});

pub const TYPE: SchedulerType = SchedulerType {
    name: "bfq",
    aliases: &["bfq-iosched", "bfq-mq"],
    about: "budget fair queueing: B-WF2Q+ over per-task queues, weight raising (Linux 4.12+ BFQ)",
    honours: &["ioprio", "weights", "groups"],
    tunables: &TUNABLES,
    build: |t, limits| Box::new(Bfq::from_tunables(t, limits)),
};

/// BFQ as Linux 6.1 runs it: the same policy with `limit_depth` (and the
/// per-queue tag share), learned injection, waker detection, stable
/// merging and 6.1's idling rules on.
pub const TYPE_61: SchedulerType = SchedulerType {
    name: "bfq-6.1",
    aliases: &["bfq-61"],
    about: "bfq with Linux 6.1's additions: tag limits, injection, wakers, stable merge",
    honours: &["ioprio", "weights", "groups"],
    tunables: &TUNABLES_61,
    build: |t, limits| Box::new(Bfq::from_tunables(t, limits).named("bfq-6.1")),
};

// ---------------------------------------------------------------------------
// Internal constants (not in sysfs).
// ---------------------------------------------------------------------------

/// The level of a task that never set one (`IOPRIO_NORM`, `BFQ_DEFAULT_QUEUE_IOPRIO`).
const DEFAULT_IOPRIO_LEVEL: u8 = 4;
/// Weight per ioprio level (`BFQ_WEIGHT_CONVERSION_COEFF`).
const WEIGHT_CONVERSION_COEFF: u32 = 10;
/// Group weights (`BFQ_MIN_WEIGHT`, `BFQ_MAX_WEIGHT`, `BFQ_WEIGHT_LEGACY_DFL`).
pub const GROUP_WEIGHT_MIN: u32 = 1;
pub const GROUP_WEIGHT_MAX: u32 = 1000;
pub const GROUP_WEIGHT_DEFAULT: u32 = 100;
/// Async requests cost three times their sectors (`bfq_async_charge_factor`).
const ASYNC_CHARGE_FACTOR: u64 = 3;
/// Budget used until the peak rate is trusted (`bfq_default_max_budget`).
const DEFAULT_MAX_BUDGET: u64 = 16 * 1024;
/// Budgets to assign before the estimate is trusted (`bfq_stats_min_budgets`).
const STATS_MIN_BUDGETS: u32 = 194;
/// Merges of queues only within 100 ms of a queue's first I/O (`bfq_merge_time_limit`).
const MERGE_TIME_LIMIT: Duration = Duration::from_millis(100);
/// Queues whose next requests are this close may merge (`BFQQ_CLOSE_THR`, 4 MiB).
const CLOSE_THR: u64 = 8 * 1024;
/// NCQ detection (`BFQ_HW_QUEUE_THRESHOLD`, `BFQ_HW_QUEUE_SAMPLES`).
const HW_QUEUE_THRESHOLD: u32 = 3;
const HW_QUEUE_SAMPLES: u32 = 32;
/// Arrivals within the timer this many times make a queue I/O-bound
/// (`bfq_requests_within_timer`).
const REQUESTS_WITHIN_TIMER: u32 = 120;
/// Weight-raising factor (`bfq_wr_coeff`).
const WR_COEFF: u32 = 30;
/// Soft real-time raising multiplies once more (`BFQ_SOFTRT_WEIGHT_FACTOR`).
const SOFTRT_WEIGHT_FACTOR: u32 = 100;
/// Soft real-time raising lasts 300 ms per renewal (`bfq_wr_rt_max_time`).
const WR_RT_MAX_TIME: Duration = Duration::from_millis(300);
/// Idle this long to be deemed interactive again (`bfq_wr_min_idle_time`).
const WR_MIN_IDLE_TIME: Duration = Duration::from_millis(2000);
/// Async queues are raised at most every 500 ms (`bfq_wr_min_inter_arr_async`).
const WR_MIN_INTER_ARR_ASYNC: Duration = Duration::from_millis(500);
/// Soft real-time means under 7000 sectors/s (`bfq_wr_max_softrt_rate`).
const WR_MAX_SOFTRT_RATE: u64 = 7000;
/// Interactive raising ends after this much raised service (`max_service_from_wr`).
const MAX_SERVICE_FROM_WR: u64 = 120_000;
/// Reference peak rates, rotational and not, (sectors/µs) << 16 (`ref_rate`).
const REF_RATE: [u64; 2] = [14_000, 33_000];
/// Start-up time of a large application on the reference devices (`ref_wr_duration`).
const REF_WR_DURATION: [Duration; 2] = [Duration::from_millis(7000), Duration::from_millis(2500)];
/// Limits of the raising duration: 3 s and 13 s (`bfq_wr_duration` in
/// 4.12 – 4.19; later kernels allow up to 25 s).
const WR_DURATION_MIN: Duration = Duration::from_secs(3);
const WR_DURATION_MAX: Duration = Duration::from_secs(13);
/// A burst is queues created within 180 ms of each other (`bfq_burst_interval`)...
const BURST_INTERVAL: Duration = Duration::from_millis(180);
/// ... and it is large from 8 queues (`bfq_large_burst_thresh`).
const LARGE_BURST_THRESH: u32 = 8;
/// A queue idle this long leaves its large burst.
const BURST_FORGET_IDLE: Duration = Duration::from_secs(10);
/// Idling for a raised queue lasts at least 20 ms (`bfq_arm_slice_timer`).
const WR_MIN_IDLE_SLICE: Duration = Duration::from_millis(20);
/// `bfq_bfqq_softrt_next_start` adds 4 jiffies (HZ = 1000).
const SOFTRT_EXTRA: Duration = Duration::from_millis(4);
/// Small requests during idling wait for merges (`blk_rq_sectors(rq) < 32`).
const SMALL_REQ: u32 = 32;
/// blk-mq's scheduler tags, `nr_requests = 2 * min(queue_depth,
/// BLKDEV_DEFAULT_RQ)` (block/blk-mq-sched.c): what `bfq_limit_depth`
/// takes its shares of.
const BLKDEV_DEFAULT_RQ: u32 = 128;
/// Shares of the tags (`bfq_update_depths`), as (numerator, shift): with
/// no queue raised, async I/O gets 1/2 and sync writes 3/4; with a raised
/// queue busy, 3/16 and 6/16, leaving the rest for sync reads.
const DEPTH_ASYNC: [(u32, u32); 2] = [(1, 1), (3, 4)];
const DEPTH_SYNC_WRITE: [(u32, u32); 2] = [(3, 2), (6, 4)];
/// The inject limit is reset this long after it last fell (step 3 of
/// `bfq_update_inject_limit`'s algorithm, in `bfq_add_request`).
const INJECT_LIMIT_RESET: Duration = Duration::from_millis(1000);
/// A total service time is sampled at most this often after the limit fell.
const INJECT_SAMPLE_INTERVAL: Duration = Duration::from_millis(10);
/// A think-time change resets a limit not measured yet only after this
/// long (`bfq_update_has_short_ttime`), unless the think time became long.
const INJECT_TTIME_BARRIER: Duration = Duration::from_millis(100);
/// Injection that inflates the in-service queue's total service time to
/// 3/2 of its baseline lowers the limit (`bfq_update_inject_limit`).
const INJECT_INFLATION: (u64, u32) = (3, 1);
/// A waker's completion precedes the woken queue's arrival by less than
/// this (`bfq_check_waker`, 4 ms).
const WAKER_WINDOW: Duration = Duration::from_millis(4);
/// Detections that confirm a waker (`bfq_check_waker`).
const WAKER_DETECTIONS: u32 = 3;
/// Detections must fall within this many `slice_idle`s of the first
/// (`bfq_check_waker`: 128, so a waker is idled for at most 1/64 of wakes).
const WAKER_SPAN_SLICES: u64 = 128;
/// Queues created within this long of the last created one are stably
/// merged with it (`bfq_burst_interval` in `bfq_do_or_sched_stable_merge`);
/// beyond `bfq_activation_stable_merging` (600 ms) the chain restarts.
const STABLE_MERGE_ACTIVATION: Duration = Duration::from_millis(600);
/// A delayed stable merge is evaluated no earlier than this after the
/// queue's creation or split (`bfq_late_stable_merging`).
const LATE_STABLE_MERGING: Duration = Duration::from_millis(600);
/// `bfqq_request_over_limit` scales the weights of higher classes by the
/// number of levels (`IOPRIO_BE_NR`).
const IOPRIO_BE_NR: u64 = 8;
/// strict_guarantees raises slice_idle to at least 8 ms.
const STRICT_MIN_SLICE_IDLE: Duration = Duration::from_millis(8);

/// The kernel's ioprio-to-weight map (`bfq_ioprio_to_weight`).
pub fn ioprio_to_weight(level: u8) -> u32 {
    u32::from(IOPRIO_LEVELS - level.min(IOPRIO_LEVELS - 1)) * WEIGHT_CONVERSION_COEFF
}

fn class_of(prio: IoPrio) -> Class {
    match prio.effective_class() {
        IoClass::RealTime => Class::Rt,
        IoClass::Idle => Class::Idle,
        _ => Class::Be,
    }
}

/// Why the in-service queue stops being served (`enum bfqq_expiration`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiration {
    /// The idle timer fired with the queue still empty.
    TooIdle,
    /// Its service slot lasted longer than the budget timeout.
    BudgetTimeout,
    /// Its next request does not fit in what is left of its budget.
    BudgetExhausted,
    /// It emptied and idling would not pay.
    NoMoreRequests,
    /// Another queue preempted it.
    Preempted,
}

type QueueIdx = u32;

/// `None` stands for the kernel's "farthest past" (`bfq_smallest_from_now`).
type PastTime = Option<Instant>;

/// Whether `now` is after `t + d` (true for the farthest past).
fn passed(t: PastTime, d: Duration, now: Instant) -> bool {
    t.is_none_or(|t| now > t + d)
}

/// A BFQ queue (`struct bfq_queue`).
#[derive(Debug)]
struct Queue {
    entity: EntityId,
    group: SchedId,
    sync: bool,
    class: Class,
    orig_weight: u32,
    sorted: SortedQueue,
    /// Arrival-ordered (deadline, id); stale entries are skipped.
    fifo: VecDeque<(Instant, RequestId)>,
    /// The FIFO was looked at in this service slot (`fifo_expire` flag).
    fifo_checked: bool,
    next_rq: Option<RequestId>,
    /// Requests dispatched and not completed.
    dispatched: u32,
    busy: bool,
    max_budget: u64,
    /// Budget timeout while in service; when it last went idle otherwise.
    budget_timeout: PastTime,
    wait_request: bool,
    non_blocking_wait_rq: bool,
    // Statistics.
    ttime: Ewma,
    last_end_request: Option<Instant>,
    seek_history: u32,
    last_request_pos: Sector,
    io_bound: bool,
    requests_within_timer: u32,
    short_ttime: bool,
    // Weight raising.
    wr_coeff: u32,
    wr_cur_max_time: Duration,
    last_wr_start_finish: PastTime,
    wr_start_at_switch_to_srt: PastTime,
    service_from_wr: u64,
    soft_rt_next_start: PastTime,
    last_idle_backlogged: Instant,
    service_from_backlogged: u64,
    softrt_update: bool,
    first_io_time: Instant,
    // Bursts and merging.
    just_created: bool,
    in_large_burst: bool,
    in_burst_list: bool,
    split_time: PastTime,
    coop: bool,
    split_coop: bool,
    new_queue: Option<QueueIdx>,
    /// Tasks whose requests go here (the kernel's process references).
    tasks: u32,
    /// Key in its group's position tree.
    pos_key: Option<Sector>,
    // Counters it is part of.
    counted_weight: Option<u32>,
    counted_pending: bool,
    // Injection (5.2): the limit on requests in the device while this
    // queue idles, its baseline total service time (zero: not measured)
    // and when the limit last fell.
    inject_limit: u32,
    last_serv_time: Duration,
    decrease_time: Instant,
    // Wakers (5.4, 5.14 form).
    waker: Option<QueueIdx>,
    tentative_waker: Option<QueueIdx>,
    waker_detections: u32,
    waker_detection_started: Instant,
    /// The task that created this sync queue (the kernel's `bic`).
    owner: Option<TaskId>,
    // Stable merging (5.13).
    creation_time: Instant,
    stable_merge_with: Option<QueueIdx>,
    stably_merged: bool,
}

impl Queue {
    fn seeky(&self) -> bool {
        self.seek_history.count_ones() > 19
    }
    fn totally_seeky(&self) -> bool {
        self.seek_history == u32::MAX
    }
    fn is_soft_rt(&self) -> bool {
        self.wr_coeff > 1 && self.wr_cur_max_time == WR_RT_MAX_TIME
    }
    fn budget_left(&self, wf: &Wf2q) -> i64 {
        let e = &wf.es[self.entity as usize];
        e.budget as i64 - e.service as i64
    }
}

/// Per-task state kept across a queue merge, restored on split
/// (`bfq_bfqq_save_state` / `bfq_bfqq_resume_state`).
#[derive(Clone, Copy, Debug)]
struct Saved {
    ttime: Ewma,
    io_bound: bool,
    short_ttime: bool,
    in_large_burst: bool,
    wr_coeff: u32,
    wr_cur_max_time: Duration,
    last_wr_start_finish: PastTime,
    wr_start_at_switch_to_srt: PastTime,
}

/// What an idle-to-busy switch found out about a queue.
#[derive(Clone, Copy, Debug)]
struct Arrival {
    old_wr: u32,
    deserves: bool,
    interactive: bool,
    in_burst: bool,
    soft_rt: bool,
}

/// A control group: a B-WF2Q+ level of its own.
#[derive(Debug)]
struct Group {
    weight: u32,
    /// Busy queues by the sector of their next request (`rq_pos_tree`).
    pos_tree: BTreeMap<Sector, QueueIdx>,
    /// Queues busy or with requests in flight.
    pending: u32,
    /// The sync queue created last here (`last_bfqq_created`).
    last_created: Option<QueueIdx>,
}

/// Detection of bursts of queue creations.
#[derive(Debug, Default)]
struct Burst {
    list: Vec<QueueIdx>,
    size: u32,
    large: bool,
    last_insertion: PastTime,
    parent: SchedId,
}

/// The BFQ policy.
#[derive(Debug)]
pub struct Bfq {
    // Tunables.
    slice_idle: Duration,
    back_seek: BackSeek,
    fifo_expire: [Duration; 2],
    timeout: Duration,
    user_max_budget: u64,
    low_latency: bool,
    strict_guarantees: bool,
    limit_depth: bool,
    injection: bool,
    /// 6.1's rules (`rules = 601`) rather than 4.12's.
    rules_61: bool,
    waker_detection: bool,
    stable_merge: bool,
    /// The registered name this instance was built under.
    name: &'static str,
    // The inject limit's measurement (`bfq_update_inject_limit`).
    last_completed: Option<QueueIdx>,
    last_completion: Option<Instant>,
    wait_dispatch: bool,
    waited_rq: Option<RequestId>,
    rqs_injected: bool,
    last_empty_occupied: Instant,
    /// blk-mq's `nr_requests` for this device.
    nr_requests: u32,
    /// Async requests, and sync writes, in the device.
    async_in_driver: u32,
    sync_writes_in_driver: u32,
    /// Queued async requests and sync writes that arrived while a raised
    /// queue was busy: the kernel allocated their tags under the shallow
    /// (raised) depth, and here they keep it until dispatched.
    shallow: FxHashSet<RequestId>,
    // Device.
    rotational: bool,
    rule: MergeRule,
    hw_tag: Option<bool>,
    max_rq_in_driver: u32,
    hw_tag_samples: u32,
    nonrot_with_queueing: bool,
    // Scheduling state.
    wf: Wf2q,
    queues: Vec<Option<Queue>>,
    free_queues: Vec<QueueIdx>,
    sync_of: FxHashMap<TaskId, QueueIdx>,
    async_of: FxHashMap<(SchedId, Class, u8), QueueIdx>,
    groups: Vec<Group>,
    group_of: FxHashMap<GroupId, SchedId>,
    saved: FxHashMap<TaskId, Saved>,
    in_flight: FxHashMap<RequestId, QueueIdx>,
    /// Queue of each entity (the arenas are freed separately).
    entity_queue: Vec<QueueIdx>,
    /// The time of the call being handled.
    now: Instant,
    queued: usize,
    in_service: Option<QueueIdx>,
    idle_until: Instant,
    last_idling_start: Instant,
    last_budget_start: Instant,
    budgets_assigned: u32,
    busy: [u32; 3],
    wr_busy: u32,
    weight_counts: BTreeMap<u32, u32>,
    groups_with_pending: u32,
    rq_in_driver: u32,
    peak: PeakRate,
    max_budget: u64,
    rate_dur_prod: u128,
    in_serv_last_pos: Sector,
    burst: Burst,
}

impl Bfq {
    /// The same policy under another registered name (a version preset).
    pub fn named(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    pub fn from_tunables(t: &Tunables, limits: &QueueLimits) -> Self {
        let ms = |name| Duration::from_millis(t.get(name) as u64);
        let mut slice_idle = ms("slice_idle");
        let slice_idle_us = Duration::from_micros(t.get("slice_idle_us") as u64);
        if t.get("slice_idle_us") != SLICE_IDLE_US {
            slice_idle = slice_idle_us;
        }
        let strict_guarantees = t.get("strict_guarantees") != 0;
        if strict_guarantees {
            slice_idle = slice_idle.max(STRICT_MIN_SLICE_IDLE);
        }
        let rot = usize::from(!limits.rotational);
        let user_max_budget = t.get("max_budget") as u64;
        let peak = PeakRate::new(REF_RATE[rot] * 2 / 3);
        let mut bfq = Bfq {
            slice_idle,
            back_seek: BackSeek {
                max: t.get("back_seek_max") as u64 * 2,
                penalty: t.get("back_seek_penalty").max(1) as u64,
            },
            fifo_expire: [ms("fifo_expire_async"), ms("fifo_expire_sync")],
            timeout: ms("timeout_sync").max(Duration::from_millis(1)),
            user_max_budget,
            low_latency: t.get("low_latency") != 0,
            strict_guarantees,
            limit_depth: t.get("limit_depth") != 0,
            injection: t.get("injection") != 0,
            rules_61: t.get("rules") >= 601,
            waker_detection: t.get("waker") != 0,
            stable_merge: t.get("stable_merge") != 0,
            name: "bfq",
            last_completed: None,
            last_completion: None,
            wait_dispatch: false,
            waited_rq: None,
            rqs_injected: false,
            last_empty_occupied: Instant::ZERO,
            nr_requests: 2 * limits.queue_depth.clamp(1, BLKDEV_DEFAULT_RQ),
            async_in_driver: 0,
            sync_writes_in_driver: 0,
            shallow: FxHashSet::default(),
            rotational: limits.rotational,
            rule: MergeRule {
                max_sectors: limits.max_sectors,
                front_merges: true,
                same_task: false,
            },
            hw_tag: None,
            max_rq_in_driver: 0,
            hw_tag_samples: 0,
            nonrot_with_queueing: !limits.rotational,
            wf: Wf2q::new(),
            queues: Vec::new(),
            free_queues: Vec::new(),
            sync_of: FxHashMap::default(),
            async_of: FxHashMap::default(),
            groups: vec![Group {
                weight: GROUP_WEIGHT_DEFAULT,
                pos_tree: BTreeMap::new(),
                pending: 0,
                last_created: None,
            }],
            group_of: FxHashMap::default(),
            saved: FxHashMap::default(),
            in_flight: FxHashMap::default(),
            entity_queue: Vec::new(),
            now: Instant::ZERO,
            queued: 0,
            in_service: None,
            idle_until: Instant::ZERO,
            last_idling_start: Instant::ZERO,
            last_budget_start: Instant::ZERO,
            budgets_assigned: 0,
            busy: [0; 3],
            wr_busy: 0,
            weight_counts: BTreeMap::new(),
            groups_with_pending: 0,
            rq_in_driver: 0,
            peak,
            max_budget: if user_max_budget > 0 {
                user_max_budget
            } else {
                DEFAULT_MAX_BUDGET
            },
            rate_dur_prod: u128::from(REF_RATE[rot]) * u128::from(REF_WR_DURATION[rot].nanos()),
            in_serv_last_pos: 0,
            burst: Burst::default(),
        };
        bfq.group_of.insert(GroupId::ROOT, ROOT);
        bfq
    }

    /// With the kernel's defaults.
    pub fn new(limits: &QueueLimits) -> Self {
        let t = TYPE.tunables(std::iter::empty()).expect("defaults");
        Bfq::from_tunables(&t, limits)
    }

    /// Configure group `group` as a child of `parent` with `weight`
    /// (io.bfq.weight, clamped to 1..=1000). Groups named by requests but
    /// never configured are children of the root with weight 100; `parent`
    /// is created that way if unknown. A group's weight may change at any
    /// time; its parent only while none of its queues is scheduled.
    ///
    /// Panics on configuring the root, on a cycle, or on moving a busy group.
    pub fn set_group(&mut self, group: GroupId, parent: GroupId, weight: u32) {
        assert!(
            group != GroupId::ROOT,
            "the root group has no weight or parent"
        );
        let weight = weight.clamp(GROUP_WEIGHT_MIN, GROUP_WEIGHT_MAX);
        let parent_sd = self.group_sched(parent);
        match self.group_of.get(&group) {
            None => {
                let sd = self.wf.new_group(parent_sd, u64::from(weight));
                debug_assert_eq!(sd as usize, self.groups.len());
                self.groups.push(Group {
                    weight,
                    pos_tree: BTreeMap::new(),
                    pending: 0,
                    last_created: None,
                });
                self.group_of.insert(group, sd);
            }
            Some(&sd) => {
                let g = self.wf.sds[sd as usize].entity;
                if self.wf.es[g as usize].parent != parent_sd {
                    let mut up = parent_sd;
                    while up != ROOT {
                        assert!(up != sd, "group {group:?} would be its own ancestor");
                        up = self.wf.es[self.wf.sds[up as usize].entity as usize].parent;
                    }
                    self.wf.reparent_group(sd, parent_sd);
                }
                self.groups[sd as usize].weight = weight;
                self.wf.set_weight(g, u64::from(weight));
            }
        }
    }

    /// Configure every group of `tree` (parents come before children there).
    pub fn set_groups(&mut self, tree: &GroupTree) {
        for g in tree.iter() {
            if let Some(parent) = g.parent {
                self.set_group(g.id, parent, g.weight);
            }
        }
    }

    /// The weight of `group` (100 if never configured).
    pub fn group_weight(&self, group: GroupId) -> u32 {
        self.group_of
            .get(&group)
            .map_or(GROUP_WEIGHT_DEFAULT, |&sd| self.groups[sd as usize].weight)
    }

    fn group_sched(&mut self, group: GroupId) -> SchedId {
        if group == GroupId::ROOT {
            return ROOT;
        }
        if let Some(&sd) = self.group_of.get(&group) {
            return sd;
        }
        self.set_group(group, GroupId::ROOT, GROUP_WEIGHT_DEFAULT);
        self.group_of[&group]
    }

    /// The current maximum budget (`bfq_max_budget`).
    pub fn max_budget(&self) -> u64 {
        if self.budgets_assigned < STATS_MIN_BUDGETS && self.user_max_budget == 0 {
            DEFAULT_MAX_BUDGET
        } else {
            self.max_budget
        }
    }

    fn min_budget(&self) -> u64 {
        self.max_budget() / 32
    }

    /// The estimated peak rate in sectors per second.
    pub fn peak_rate(&self) -> f64 {
        self.peak.rate as f64 / f64::from(1u32 << RATE_SHIFT) * 1e6
    }

    /// Whether the device was found to queue commands (NCQ/TCQ).
    pub fn hw_tag(&self) -> Option<bool> {
        self.hw_tag
    }

    /// Weight-raising duration for interactive queues (`bfq_wr_duration`).
    pub fn wr_duration(&self) -> Duration {
        let d = self.rate_dur_prod / u128::from(self.peak.rate.max(1));
        Duration(d as u64).max(WR_DURATION_MIN).min(WR_DURATION_MAX)
    }

    /// The raising coefficient of `task`'s sync queue (1 when not raised).
    pub fn wr_coeff(&self, task: TaskId) -> u32 {
        self.sync_of.get(&task).map_or(1, |&q| self.q(q).wr_coeff)
    }

    /// Whether `task`'s sync queue shares a merged queue with another task.
    pub fn is_merged(&self, task: TaskId) -> bool {
        self.sync_of
            .get(&task)
            .is_some_and(|&q| self.q(q).tasks > 1)
    }

    fn q(&self, q: QueueIdx) -> &Queue {
        self.queues[q as usize].as_ref().expect("live queue")
    }

    fn qm(&mut self, q: QueueIdx) -> &mut Queue {
        self.queues[q as usize].as_mut().expect("live queue")
    }

    fn total_busy(&self) -> u32 {
        self.busy.iter().sum()
    }

    // -----------------------------------------------------------------------
    // Queue lifetime.
    // -----------------------------------------------------------------------

    fn new_queue(&mut self, group: SchedId, prio: IoPrio, sync: bool, now: Instant) -> QueueIdx {
        let class = class_of(prio);
        let orig_weight = ioprio_to_weight(prio.level());
        let entity = self
            .wf
            .new_queue_entity(group, class, u64::from(orig_weight));
        let queue = Queue {
            entity,
            group,
            sync,
            class,
            orig_weight,
            sorted: SortedQueue::new(),
            fifo: VecDeque::new(),
            fifo_checked: false,
            next_rq: None,
            dispatched: 0,
            busy: false,
            max_budget: 2 * self.max_budget() / 3,
            budget_timeout: None,
            wait_request: false,
            non_blocking_wait_rq: false,
            ttime: Ewma::default(),
            last_end_request: None,
            seek_history: 1,
            last_request_pos: 0,
            io_bound: true,
            requests_within_timer: 0,
            short_ttime: sync && class != Class::Idle,
            wr_coeff: 1,
            wr_cur_max_time: Duration::ZERO,
            last_wr_start_finish: Some(now),
            wr_start_at_switch_to_srt: None,
            service_from_wr: 0,
            soft_rt_next_start: Some(now),
            last_idle_backlogged: now,
            service_from_backlogged: 0,
            softrt_update: false,
            first_io_time: now,
            just_created: sync,
            in_large_burst: false,
            in_burst_list: false,
            split_time: None,
            coop: false,
            split_coop: false,
            new_queue: None,
            tasks: 0,
            pos_key: None,
            counted_weight: None,
            counted_pending: false,
            // Zeroed at allocation, as the kernel's.
            inject_limit: 0,
            last_serv_time: Duration::ZERO,
            decrease_time: now,
            waker: None,
            tentative_waker: None,
            waker_detections: 0,
            waker_detection_started: now,
            owner: None,
            creation_time: now,
            stable_merge_with: None,
            stably_merged: false,
        };
        let q = if let Some(i) = self.free_queues.pop() {
            self.queues[i as usize] = Some(queue);
            i
        } else {
            self.queues.push(Some(queue));
            (self.queues.len() - 1) as QueueIdx
        };
        if self.entity_queue.len() <= entity as usize {
            self.entity_queue.resize(entity as usize + 1, wf2q::NIL);
        }
        self.entity_queue[entity as usize] = q;
        q
    }

    /// Free a sync queue nobody uses once it is fully idle.
    fn maybe_free(&mut self, q: QueueIdx) {
        let qu = self.q(q);
        if !qu.sync
            || qu.tasks > 0
            || qu.busy
            || qu.dispatched > 0
            || !qu.sorted.is_empty()
            || self.in_service == Some(q)
        {
            return;
        }
        let entity = qu.entity;
        self.pos_remove(q);
        self.wf.free_entity(entity);
        self.burst.list.retain(|&x| x != q);
        for other in self.queues.iter_mut().flatten() {
            if other.new_queue == Some(q) {
                other.new_queue = None;
            }
        }
        self.forget_queue(q);
        self.queues[q as usize] = None;
        self.free_queues.push(q);
    }

    /// The queue for `rq`, creating, splitting or resolving merges.
    fn queue_for(&mut self, rq: &Request, now: Instant) -> QueueIdx {
        let group = self.group_sched(rq.group);
        if !rq.sync {
            let class = class_of(rq.prio);
            // Class NONE shares the normal level's async queue (IOPRIO_NORM).
            let level = if rq.prio.class() == IoClass::None {
                DEFAULT_IOPRIO_LEVEL
            } else {
                rq.prio.level()
            };
            let key = (group, class, level);
            if let Some(&q) = self.async_of.get(&key) {
                return q;
            }
            let q = self.new_queue(
                group,
                IoPrio::new(rq.prio.effective_class(), level),
                false,
                now,
            );
            self.qm(q).tasks = 1;
            self.async_of.insert(key, q);
            return q;
        }
        if let Some(&q) = self.sync_of.get(&rq.task) {
            let qu = self.q(q);
            if qu.group == group {
                if qu.coop && qu.split_coop && !qu.stably_merged {
                    return self.split(rq.task, q, rq, now);
                }
                return q;
            }
            // The task moved to another group: it gets a new queue there.
            self.release_task(rq.task, q);
        }
        let q = self.new_queue(group, rq.prio, true, now);
        let qu = self.qm(q);
        qu.tasks = 1;
        qu.owner = Some(rq.task);
        self.sync_of.insert(rq.task, q);
        if self.burst.size > 0 || self.total_busy() == 0 {
            self.handle_burst(q, now);
        }
        if self.stable_merge {
            return self.stable_merge_on_creation(rq.task, q, now);
        }
        q
    }

    /// `task` stops using queue `q` (exit, merge or move).
    fn release_task(&mut self, task: TaskId, q: QueueIdx) {
        if self.sync_of.get(&task) == Some(&q) {
            self.sync_of.remove(&task);
        }
        let qu = self.qm(q);
        qu.tasks = qu.tasks.saturating_sub(1);
        if qu.tasks == 0 && qu.busy && qu.sorted.is_empty() && self.in_service != Some(q) {
            self.del_busy(q);
        }
        self.maybe_free(q);
    }

    /// Break `task` out of the merged queue `q` (`bfq_split_bfqq`).
    fn split(&mut self, task: TaskId, q: QueueIdx, rq: &Request, now: Instant) -> QueueIdx {
        if self.q(q).tasks == 1 {
            let qu = self.qm(q);
            qu.coop = false;
            qu.split_coop = false;
            return q;
        }
        let waker = self.q(q).waker;
        self.release_task(task, q);
        let group = self.group_sched(rq.group);
        let n = self.new_queue(group, rq.prio, true, now);
        // The split queue keeps the shared queue's waker (`bfq_init_rq`).
        self.qm(n).waker = waker.filter(|&w| self.queues[w as usize].is_some());
        self.sync_of.insert(task, n);
        let saved = self.saved.remove(&task);
        let large_burst = self.burst.large;
        let qu = self.qm(n);
        qu.tasks = 1;
        qu.owner = Some(task);
        qu.split_time = Some(now);
        qu.just_created = false;
        if let Some(s) = saved {
            qu.ttime = s.ttime;
            qu.io_bound = s.io_bound;
            qu.short_ttime = s.short_ttime;
            qu.in_large_burst = s.in_large_burst && large_burst;
            qu.wr_coeff = s.wr_coeff;
            qu.wr_cur_max_time = s.wr_cur_max_time;
            qu.last_wr_start_finish = s.last_wr_start_finish;
            qu.wr_start_at_switch_to_srt = s.wr_start_at_switch_to_srt;
            let expired = qu.wr_coeff > 1
                && (qu.in_large_burst || passed(qu.last_wr_start_finish, qu.wr_cur_max_time, now));
            if expired {
                if qu.is_soft_rt()
                    && !qu.in_large_burst
                    && !passed(qu.wr_start_at_switch_to_srt, self.wr_duration(), now)
                {
                    let d = self.wr_duration();
                    let qu = self.qm(n);
                    qu.wr_coeff = WR_COEFF;
                    qu.wr_cur_max_time = d;
                    qu.last_wr_start_finish = qu.wr_start_at_switch_to_srt;
                } else {
                    self.qm(n).wr_coeff = 1;
                }
            }
            self.apply_weight(n);
        }
        n
    }

    /// Update the burst list with the newly created queue `q` (`bfq_handle_burst`).
    fn handle_burst(&mut self, q: QueueIdx, now: Instant) {
        let group = self.q(q).group;
        if self.q(q).in_burst_list || self.q(q).in_large_burst {
            return;
        }
        if passed(self.burst.last_insertion, BURST_INTERVAL, now) || group != self.burst.parent {
            // The burst is over: start a possible new one with q.
            self.burst.large = false;
            for x in std::mem::take(&mut self.burst.list) {
                if let Some(qu) = self.queues[x as usize].as_mut() {
                    qu.in_burst_list = false;
                }
            }
            if self.total_busy() == 0 {
                self.burst.list.push(q);
                self.qm(q).in_burst_list = true;
                self.burst.size = 1;
            } else {
                self.burst.size = 0;
            }
            self.burst.parent = group;
        } else if self.burst.large {
            self.qm(q).in_large_burst = true;
        } else {
            self.burst.size += 1;
            if self.burst.size >= LARGE_BURST_THRESH {
                self.burst.large = true;
                for x in std::mem::take(&mut self.burst.list) {
                    if let Some(qu) = self.queues[x as usize].as_mut() {
                        qu.in_large_burst = true;
                        qu.in_burst_list = false;
                    }
                }
                self.qm(q).in_large_burst = true;
            } else {
                self.burst.list.push(q);
                self.qm(q).in_burst_list = true;
            }
        }
        self.burst.last_insertion = Some(now);
    }

    /// A request of `q` may have a new `prio`: apply it while `q` is idle
    /// (the kernel applies ioprio changes at the next activation).
    fn apply_prio(&mut self, q: QueueIdx, prio: IoPrio) {
        let qu = self.q(q);
        if !qu.sync || qu.busy || self.in_service == Some(q) {
            return;
        }
        let class = class_of(prio);
        let weight = ioprio_to_weight(prio.level());
        if class != qu.class || weight != qu.orig_weight {
            let entity = qu.entity;
            self.wf.set_class(entity, class);
            let qu = self.qm(q);
            qu.class = class;
            qu.orig_weight = weight;
            self.apply_weight(q);
        }
    }

    // -----------------------------------------------------------------------
    // Counters behind the symmetry test.
    // -----------------------------------------------------------------------

    /// Keep the weight counters (busy or in-flight, not raised) and the
    /// per-group pending counts in step with `q`'s state.
    fn update_counters(&mut self, q: QueueIdx) {
        let qu = self.q(q);
        let active = qu.busy || qu.dispatched > 0;
        let want_weight = (active && qu.wr_coeff == 1).then_some(qu.orig_weight);
        let (old_weight, old_pending, group) = (qu.counted_weight, qu.counted_pending, qu.group);
        if old_weight != want_weight {
            if let Some(w) = old_weight {
                let c = self.weight_counts.get_mut(&w).expect("counted weight");
                *c -= 1;
                if *c == 0 {
                    self.weight_counts.remove(&w);
                }
            }
            if let Some(w) = want_weight {
                *self.weight_counts.entry(w).or_insert(0) += 1;
            }
            self.qm(q).counted_weight = want_weight;
        }
        if old_pending != active {
            let g = &mut self.groups[group as usize];
            if active {
                g.pending += 1;
                if g.pending == 1 && group != ROOT {
                    self.groups_with_pending += 1;
                }
            } else {
                g.pending -= 1;
                if g.pending == 0 && group != ROOT {
                    self.groups_with_pending -= 1;
                }
            }
            self.qm(q).counted_pending = active;
        }
    }

    /// Whether `q` may lose its share without idling: busy queues have
    /// different weights or classes, or groups have pending I/O
    /// (`bfq_symmetric_scenario` of 4.12 – 4.19, negated). Linux 5.x also
    /// lets the lightest queue skip idling; that leaves it only what
    /// preemption wins back, about two requests per slot of a heavier
    /// queue on NCQ flash, so the 4.x rule is kept.
    fn asymmetric(&self, q: QueueIdx) -> bool {
        let classes = self.busy.iter().filter(|&&b| b > 0).count();
        if self.rules_61 {
            // 6.1: the lightest queue needs no idling to get its share,
            // and one group with pending I/O alone is symmetric.
            let counted = self.q(q).counted_weight;
            let lightest =
                counted.is_some() && self.weight_counts.keys().next() == counted.as_ref();
            let varied_weights = !lightest && self.weight_counts.len() >= 2;
            return varied_weights || classes >= 2 || self.groups_with_pending > 1;
        }
        let varied_weights = self.weight_counts.len() >= 2;
        varied_weights || classes >= 2 || self.groups_with_pending > 0
    }

    /// Set the entity weight from the queue's weight and raising.
    fn apply_weight(&mut self, q: QueueIdx) {
        let qu = self.q(q);
        let w = u64::from(qu.orig_weight) * u64::from(qu.wr_coeff);
        let entity = qu.entity;
        self.wf.set_weight(entity, w);
        self.update_counters(q);
    }

    // -----------------------------------------------------------------------
    // Budgets and charging.
    // -----------------------------------------------------------------------

    /// Sectors charged for `sectors` of `q` (`bfq_serv_to_charge`).
    fn charge(&self, q: QueueIdx, sectors: u32) -> u64 {
        let qu = self.q(q);
        if qu.sync || qu.wr_coeff > 1 || self.asymmetric(q) {
            u64::from(sectors)
        } else {
            u64::from(sectors) * ASYNC_CHARGE_FACTOR
        }
    }

    fn next_charge(&self, q: QueueIdx) -> u64 {
        let qu = self.q(q);
        qu.next_rq
            .and_then(|id| qu.sorted.get(id))
            .map_or(0, |r| self.charge(q, r.sectors))
    }

    /// The next request changed: make the budget fit it (`bfq_updated_next_req`).
    fn updated_next_req(&mut self, q: QueueIdx) {
        if self.in_service == Some(q) || self.q(q).next_rq.is_none() {
            return;
        }
        let need = self.next_charge(q);
        let qu = self.q(q);
        let e = &self.wf.es[qu.entity as usize];
        let budget = qu.max_budget.max(need).max(e.service);
        if budget != e.budget {
            let entity = qu.entity;
            self.wf.es[entity as usize].budget = budget;
            self.wf.reposition(entity);
        }
    }

    /// Adapt `q`'s next budget to why it expired (`__bfq_bfqq_recalc_budget`).
    fn recalc_budget(&mut self, q: QueueIdx, reason: Expiration) {
        let min = self.min_budget();
        // The kernel caps growth with the field (`bfqd->bfq_max_budget`:
        // the estimate, or the default until one exists), not with
        // `bfq_max_budget()`, which holds the default for 194 budgets.
        let max = self.max_budget;
        let qu = self.q(q);
        let mut budget = if qu.wr_coeff == 1 {
            qu.max_budget
        } else {
            2 * min
        };
        if qu.sync && qu.wr_coeff == 1 {
            budget = match reason {
                Expiration::TooIdle if qu.dispatched > 0 => (budget * 2).min(max),
                Expiration::TooIdle if budget > 5 * min => budget - 4 * min,
                Expiration::TooIdle => min,
                Expiration::BudgetTimeout => (budget * 2).min(max),
                Expiration::BudgetExhausted => (budget * 4).min(max),
                Expiration::NoMoreRequests => self.wf.es[qu.entity as usize].service.max(min),
                Expiration::Preempted => return,
            };
        } else if !qu.sync {
            budget = max;
        }
        if self.budgets_assigned >= STATS_MIN_BUDGETS && self.user_max_budget == 0 {
            budget = budget.min(self.max_budget);
        }
        self.qm(q).max_budget = budget;
        if self.q(q).next_rq.is_some() {
            let need = self.next_charge(q);
            let entity = self.q(q).entity;
            self.wf.es[entity as usize].budget = budget.max(need);
        }
    }

    /// Charge `q` as if it had been served at the peak rate for `time_ms`
    /// (`bfq_bfqq_charge_time`), at most one budget timeout's worth.
    ///
    /// Linux 4.12 – 4.18 charged only the service when the slot had
    /// lasted the whole timeout or longer, so a seeky queue that kept the
    /// disk for a full slot (as it does whenever idling is needed for
    /// guarantees, e.g. with groups) paid for a few sectors and was picked
    /// again at once; 4.19 on bound the time to the timeout instead
    /// (`bounded_time_ms = min(time_ms, timeout_ms)`), which is what is
    /// done here.
    fn charge_time(&mut self, q: QueueIdx, time_ms: u64, now: Instant) {
        let entity = self.q(q).entity;
        let service = self.wf.es[entity as usize].service;
        let timeout_ms = (self.timeout.nanos() / 1_000_000).max(1);
        let bounded_ms = time_ms.min(timeout_ms);
        let total = (self.max_budget * bounded_ms / timeout_ms).max(service);
        let e = &mut self.wf.es[entity as usize];
        e.budget = e.budget.max(total);
        self.queue_served(q, total - service, now);
    }

    /// Whether `q` consumed its budget slowly (`bfq_bfqq_is_slow`); also
    /// the service slot's length in ms.
    fn is_slow(&self, q: QueueIdx, compensate: bool, now: Instant) -> (bool, u64) {
        let qu = self.q(q);
        let mut slow = qu.seeky();
        if !qu.sync {
            return (false, 0);
        }
        let end = if compensate {
            self.last_idling_start
        } else {
            now
        };
        let delta_us = end.since(self.last_budget_start).nanos() / 1_000;
        if delta_us < 1000 {
            let ms = if self.rotational {
                self.slice_idle.nanos() / 1_000_000
            } else {
                MIN_TT.nanos() / 1_000_000
            };
            return (slow, ms);
        }
        if delta_us > 20_000 {
            slow = self.wf.es[qu.entity as usize].service < self.max_budget / 2;
        }
        (slow, delta_us / 1000)
    }

    /// Account `served` sectors to `q` and its groups (`bfq_bfqq_served`).
    fn queue_served(&mut self, q: QueueIdx, served: u64, now: Instant) {
        let qu = self.qm(q);
        if qu.service_from_backlogged == 0 {
            qu.first_io_time = now;
        }
        if qu.wr_coeff > 1 {
            qu.service_from_wr += served;
        }
        qu.service_from_backlogged += served;
        let entity = qu.entity;
        self.wf.served(entity, served);
    }
}

// ---------------------------------------------------------------------------
// Weight raising.
// ---------------------------------------------------------------------------

impl Bfq {
    /// End `q`'s raising (`bfq_bfqq_end_wr`).
    fn end_wr(&mut self, q: QueueIdx, now: Instant) {
        let qu = self.qm(q);
        if qu.wr_coeff == 1 {
            return;
        }
        if qu.busy {
            self.wr_busy -= 1;
        }
        let qu = self.qm(q);
        qu.wr_coeff = 1;
        qu.wr_cur_max_time = Duration::ZERO;
        qu.last_wr_start_finish = Some(now);
        self.apply_weight(q);
    }

    /// Set `q`'s raising coefficient, keeping the busy-raised count.
    fn set_wr(&mut self, q: QueueIdx, coeff: u32, max_time: Duration) {
        let qu = self.qm(q);
        let was = qu.wr_coeff > 1;
        qu.wr_coeff = coeff;
        qu.wr_cur_max_time = max_time;
        if qu.busy && !was && coeff > 1 {
            self.wr_busy += 1;
        } else if qu.busy && was && coeff == 1 {
            self.wr_busy -= 1;
        }
        self.apply_weight(q);
    }

    /// When `q` may next arrive and count as soft real-time
    /// (`bfq_bfqq_softrt_next_start`).
    fn softrt_next_start(&self, q: QueueIdx, now: Instant) -> Instant {
        let qu = self.q(q);
        let by_rate = qu.last_idle_backlogged
            + Duration(qu.service_from_backlogged * 1_000_000_000 / WR_MAX_SOFTRT_RATE);
        let by_idle = now + self.slice_idle + SOFTRT_EXTRA;
        qu.soft_rt_next_start
            .unwrap_or(Instant::ZERO)
            .max(by_rate)
            .max(by_idle)
    }

    /// Start, renew or end raising on an idle-to-busy switch
    /// (`bfq_update_bfqq_wr_on_rq_arrival`).
    fn update_wr_on_arrival(&mut self, q: QueueIdx, a: Arrival, now: Instant) {
        let Arrival {
            old_wr,
            deserves,
            interactive,
            in_burst,
            soft_rt,
        } = a;
        let dur = self.wr_duration();
        if old_wr == 1 && deserves {
            if interactive {
                self.qm(q).service_from_wr = 0;
                self.set_wr(q, WR_COEFF, dur);
            } else {
                self.qm(q).wr_start_at_switch_to_srt = None;
                self.set_wr(q, WR_COEFF * SOFTRT_WEIGHT_FACTOR, WR_RT_MAX_TIME);
            }
            // Keep the raised budget close to the backlog.
            let cap = 2 * self.min_budget();
            let e = self.q(q).entity;
            let b = &mut self.wf.es[e as usize].budget;
            *b = (*b).min(cap);
        } else if old_wr > 1 {
            if interactive {
                self.set_wr(q, WR_COEFF, dur);
            } else if in_burst {
                self.set_wr(q, 1, Duration::ZERO);
            } else if soft_rt {
                if !self.q(q).is_soft_rt() {
                    let qu = self.qm(q);
                    qu.wr_start_at_switch_to_srt = qu.last_wr_start_finish;
                    self.set_wr(q, WR_COEFF * SOFTRT_WEIGHT_FACTOR, WR_RT_MAX_TIME);
                }
                self.qm(q).last_wr_start_finish = Some(now);
            }
        }
    }

    /// On each dispatch of the in-service queue: end raising that ran out
    /// (`bfq_update_wr_data`).
    fn update_wr_data(&mut self, q: QueueIdx, now: Instant) {
        let qu = self.q(q);
        if qu.wr_coeff == 1 {
            return;
        }
        if qu.in_large_burst {
            self.end_wr(q, now);
        } else if passed(qu.last_wr_start_finish, qu.wr_cur_max_time, now) {
            if !qu.is_soft_rt() || passed(qu.wr_start_at_switch_to_srt, self.wr_duration(), now) {
                self.end_wr(q, now);
            } else {
                // Soft real-time period over, interactive one still running.
                let dur = self.wr_duration();
                let back = self.q(q).wr_start_at_switch_to_srt;
                self.set_wr(q, WR_COEFF, dur);
                self.qm(q).last_wr_start_finish = back;
            }
        }
        let qu = self.q(q);
        if qu.wr_coeff > 1 && !qu.is_soft_rt() && qu.service_from_wr > MAX_SERVICE_FROM_WR {
            self.end_wr(q, now);
        }
    }
}

// ---------------------------------------------------------------------------
// Busy/idle switches and queue selection.
// ---------------------------------------------------------------------------

impl Bfq {
    fn add_busy(&mut self, q: QueueIdx) {
        let qu = self.qm(q);
        let backshift = if qu.non_blocking_wait_rq {
            u64::from(qu.wr_coeff)
        } else {
            0
        };
        qu.non_blocking_wait_rq = false;
        qu.busy = true;
        let (entity, class, raised) = (qu.entity, qu.class, qu.wr_coeff > 1);
        self.wf.activate(entity, backshift);
        self.busy[class.index()] += 1;
        if raised {
            self.wr_busy += 1;
        }
        self.update_counters(q);
    }

    /// `q` leaves the schedule (not in service) (`bfq_del_bfqq_busy`).
    fn del_busy(&mut self, q: QueueIdx) {
        let qu = self.qm(q);
        debug_assert!(qu.busy);
        qu.busy = false;
        let (entity, class, raised) = (qu.entity, qu.class, qu.wr_coeff > 1);
        self.busy[class.index()] -= 1;
        if raised {
            self.wr_busy -= 1;
        }
        if self.wf.es[entity as usize].place == Place::Active {
            self.wf.deactivate(entity);
        }
        self.update_counters(q);
    }

    /// Budget for a queue becoming busy; true if it may reclaim the rest of
    /// a budget it lost by emptying briefly (`bfq_bfqq_update_budg_for_activation`).
    fn update_budget_for_activation(&mut self, q: QueueIdx, arrived_in_time: bool) -> bool {
        let left = self.q(q).budget_left(&self.wf);
        let need = self.next_charge(q);
        let qu = self.queues[q as usize].as_mut().expect("live queue");
        let e = &mut self.wf.es[qu.entity as usize];
        if qu.non_blocking_wait_rq && arrived_in_time && left > 0 {
            e.budget = (left as u64).min(qu.max_budget);
            e.service = 0;
            return true;
        }
        e.service = 0;
        e.budget = qu.max_budget.max(need);
        qu.non_blocking_wait_rq = false;
        false
    }

    /// `q` gets its first request after being idle
    /// (`bfq_bfqq_handle_idle_busy_switch`).
    fn idle_busy_switch(&mut self, q: QueueIdx, old_wr: u32, now: Instant) -> bool {
        let qu = self.q(q);
        let idle_for_long = qu.dispatched == 0 && passed(qu.budget_timeout, WR_MIN_IDLE_TIME, now);
        let arrived_in_time = qu
            .last_end_request
            .is_none_or(|t| now <= t + self.slice_idle.mul(3));
        let in_burst = qu.in_large_burst;
        let soft_rt = !qu.totally_seeky()
            && !in_burst
            && passed(qu.soft_rt_next_start, Duration::ZERO, now)
            && qu.dispatched == 0;
        let interactive = !in_burst && idle_for_long;
        // Only queues of the default weight are raised (Linux 5.x on:
        // raising a queue whose weight was set on purpose would defeat it).
        let deserves = self.low_latency
            && (qu.wr_coeff > 1
                || (qu.sync
                    && (qu.tasks == 1 || qu.stably_merged)
                    && qu.orig_weight == ioprio_to_weight(DEFAULT_IOPRIO_LEVEL)
                    && (interactive || soft_rt)));
        let wants_to_preempt = self.update_budget_for_activation(q, arrived_in_time);

        let qu = self.qm(q);
        if !qu.just_created && idle_for_long && passed(qu.budget_timeout, BURST_FORGET_IDLE, now) {
            qu.in_large_burst = false;
            if qu.in_burst_list {
                qu.in_burst_list = false;
                self.burst.list.retain(|&x| x != q);
            }
        }
        let qu = self.qm(q);
        qu.just_created = false;
        if !qu.io_bound {
            if arrived_in_time {
                qu.requests_within_timer += 1;
                if qu.requests_within_timer >= REQUESTS_WITHIN_TIMER {
                    qu.io_bound = true;
                }
            } else {
                qu.requests_within_timer = 0;
            }
        }
        if self.low_latency && passed(self.q(q).split_time, WR_MIN_IDLE_TIME, now) {
            let a = Arrival {
                old_wr,
                deserves,
                interactive,
                in_burst,
                soft_rt,
            };
            self.update_wr_on_arrival(q, a, now);
        }
        let qu = self.qm(q);
        qu.last_idle_backlogged = now;
        qu.service_from_backlogged = 0;
        qu.softrt_update = false;
        self.add_busy(q);

        // Preempt the in-service queue when q must reclaim a hole and is at
        // least as raised, or outranks it by class or weight.
        if let Some(s) = self.in_service {
            if s != q {
                let (qu, su) = (self.q(q), self.q(s));
                // 6.1 also preempts a queue that would not idle anyway.
                let plugless = self.rules_61 && !self.better_to_idle(s);
                if (wants_to_preempt && qu.wr_coeff >= su.wr_coeff)
                    || self.outranks(q, s)
                    || plugless
                {
                    self.expire(s, false, Expiration::Preempted, now);
                }
            }
        }
        interactive
    }

    /// Higher class, or higher weight at the level where the two meet
    /// (`bfq_bfqq_higher_class_or_weight`).
    fn outranks(&self, q: QueueIdx, s: QueueIdx) -> bool {
        let (qu, su) = (self.q(q), self.q(s));
        if qu.class < su.class {
            return true;
        }
        let weight = |x: &Queue| {
            if qu.group == su.group || x.group == ROOT {
                self.wf.es[x.entity as usize].weight
            } else {
                self.wf.es[self.wf.sds[x.group as usize].entity as usize].weight
            }
        };
        weight(qu) > weight(su)
    }

    /// Put the next queue in service (`bfq_set_in_service_queue`).
    fn set_in_service(&mut self, now: Instant) -> Option<QueueIdx> {
        if self.total_busy() == 0 {
            return None;
        }
        let entity = self.wf.select(now)?;
        let q = self.queue_of_entity(entity);
        self.budgets_assigned = (self.budgets_assigned * 7 + 256) / 8;
        let timeout = self.timeout;
        let qu = self.qm(q);
        qu.fifo_checked = false;
        if qu.is_soft_rt() && passed(qu.last_wr_start_finish, Duration::ZERO, now) {
            if let Some(t) = qu.budget_timeout.filter(|&t| t < now) {
                // Do not let the wait for service eat a soft real-time period.
                match qu.last_wr_start_finish {
                    Some(start) if t > start => {
                        qu.last_wr_start_finish = Some(start + now.since(t))
                    }
                    _ => qu.last_wr_start_finish = Some(now),
                }
            }
        }
        let coeff = if qu.is_soft_rt() {
            1
        } else {
            u64::from(qu.wr_coeff)
        };
        qu.budget_timeout = Some(now + timeout.mul(coeff));
        self.last_budget_start = now;
        self.in_service = Some(q);
        Some(q)
    }

    fn queue_of_entity(&self, entity: EntityId) -> QueueIdx {
        // Queue and entity arenas grow together but are freed separately;
        // a reverse map keeps the lookup O(1).
        self.entity_queue[entity as usize]
    }
}

// ---------------------------------------------------------------------------
// Idling and expiry.
// ---------------------------------------------------------------------------

impl Bfq {
    /// Idling for `q` raises throughput without hurting raised queues
    /// (`idling_boosts_thr_without_issues`).
    fn idling_boosts_throughput(&self, q: QueueIdx) -> bool {
        let qu = self.q(q);
        if qu.tasks == 0 {
            return false;
        }
        let no_queueing = self.hw_tag == Some(false);
        let rot_without_queueing = self.rotational && no_queueing;
        let seq_io_bound = !qu.seeky() && qu.io_bound && qu.short_ttime;
        let boosts = rot_without_queueing || ((self.rotational || no_queueing) && seq_io_bound);
        boosts && self.wr_busy == 0
    }

    /// Without idling `q` would lose its share or its low latency
    /// (`idling_needed_for_service_guarantees`).
    fn idling_needed_for_guarantees(&self, q: QueueIdx) -> bool {
        let qu = self.q(q);
        if qu.tasks == 0 {
            return false;
        }
        (qu.wr_coeff > 1
            && (self.wr_busy < self.total_busy() || self.rq_in_driver >= qu.dispatched + 4))
            || self.asymmetric(q)
            // 6.1 keeps plugging for a queue that is the only busy one
            // (5.12, "block, bfq: do not expire a queue when it is the only
            // busy one"). Once unraised, nothing else plugs for a queue in
            // a symmetric scenario: a seeky reader beside a writeback queue
            // of equal weight that always has a request waiting is left
            // behind whatever the device holds (issue 17).
            || (self.rules_61 && self.total_busy() == 1)
    }

    /// `bfq_better_to_idle`.
    fn better_to_idle(&self, q: QueueIdx) -> bool {
        let qu = self.q(q);
        if qu.tasks == 0 {
            return false;
        }
        if self.strict_guarantees {
            return true;
        }
        if self.slice_idle == Duration::ZERO || !qu.sync || qu.class == Class::Idle {
            return false;
        }
        self.idling_boosts_throughput(q) || self.idling_needed_for_guarantees(q)
    }

    fn must_idle(&self, q: QueueIdx) -> bool {
        self.q(q).sorted.is_empty() && self.better_to_idle(q)
    }

    fn budget_timed_out(&self, q: QueueIdx, now: Instant) -> bool {
        self.q(q).budget_timeout.is_none_or(|t| now >= t)
    }

    /// `bfq_may_expire_for_budg_timeout`: not while idling for a queue that
    /// used most of its budget (that would misalign its timestamps).
    fn may_expire_for_budget_timeout(&self, q: QueueIdx, now: Instant) -> bool {
        let qu = self.q(q);
        let budget = self.wf.es[qu.entity as usize].budget as i64;
        (!qu.wait_request || qu.budget_left(&self.wf) >= budget / 3)
            && self.budget_timed_out(q, now)
    }

    /// Idle for the in-service queue's next request (`bfq_arm_slice_timer`).
    fn arm_idle_timer(&mut self, q: QueueIdx, now: Instant) {
        let mut sl = self.slice_idle;
        let qu = self.q(q);
        if qu.seeky() && qu.wr_coeff == 1 && !self.asymmetric(q) {
            sl = sl.min(MIN_TT);
        } else if qu.wr_coeff > 1 {
            sl = sl.max(WR_MIN_IDLE_SLICE);
        }
        self.qm(q).wait_request = true;
        self.last_idling_start = now;
        self.idle_until = now + sl;
    }

    /// End the in-service queue's service slot (`bfq_bfqq_expire`).
    fn expire(&mut self, q: QueueIdx, compensate: bool, reason: Expiration, now: Instant) {
        debug_assert_eq!(self.in_service, Some(q));
        let (slow, delta_ms) = self.is_slow(q, compensate, now);
        let qu = self.q(q);
        let e = &self.wf.es[qu.entity as usize];
        let (budget, service) = (e.budget, e.service);
        // Slow queues, and queues that timed out with a third of their
        // budget left, pay for the time they held the disk.
        if qu.wr_coeff == 1
            && (slow
                || (reason == Expiration::BudgetTimeout
                    && qu.budget_left(&self.wf) >= budget as i64 / 3))
        {
            self.charge_time(q, delta_ms, now);
        }
        let low_latency = self.low_latency;
        let qu = self.qm(q);
        if reason == Expiration::TooIdle && service <= 2 * budget / 10 {
            qu.io_bound = false;
        }
        if low_latency && qu.wr_coeff == 1 {
            qu.last_wr_start_finish = Some(now);
        }
        if low_latency && qu.sorted.is_empty() {
            if qu.dispatched == 0 {
                let t = self.softrt_next_start(q, now);
                self.qm(q).soft_rt_next_start = Some(t);
            } else if qu.dispatched > 0 {
                qu.softrt_update = true;
            }
        }
        // No total service time to measure any longer.
        self.rqs_injected = false;
        self.wait_dispatch = false;
        self.waited_rq = None;
        self.recalc_budget(q, reason);

        // __bfq_bfqq_expire.
        let qu = self.qm(q);
        if qu.coop && qu.seeky() {
            qu.split_coop = true;
        }
        qu.wait_request = false;
        let entity = qu.entity;
        let empty = qu.sorted.is_empty();
        let keep_for_guarantees =
            reason == Expiration::Preempted && self.idling_needed_for_guarantees(q);
        self.in_service = None;
        if empty && !keep_for_guarantees {
            let qu = self.qm(q);
            if qu.dispatched == 0 {
                qu.budget_timeout = Some(now);
            }
            qu.busy = false;
            let (class, raised) = (qu.class, qu.wr_coeff > 1);
            self.busy[class.index()] -= 1;
            if raised {
                self.wr_busy -= 1;
            }
            self.wf.expire(entity, false);
            self.update_counters(q);
        } else {
            self.wf.expire(entity, true);
            self.pos_update(q);
        }
        let qu = self.qm(q);
        if !qu.busy && reason != Expiration::BudgetTimeout && reason != Expiration::BudgetExhausted
        {
            // Keep the service: if a request comes in time, the queue goes
            // on with the rest of this budget.
            qu.non_blocking_wait_rq = true;
        } else {
            self.wf.es[entity as usize].service = 0;
        }
        self.maybe_free(q);
    }

    /// Decide which queue to serve now (`bfq_select_queue`); None when the
    /// in-service queue is kept idle or nothing is busy.
    fn select_queue(&mut self, now: Instant) -> Option<QueueIdx> {
        let mut cur = self.in_service;
        if let Some(q) = cur {
            if self.may_expire_for_budget_timeout(q, now) && !self.must_idle(q) {
                self.expire(q, false, Expiration::BudgetTimeout, now);
                cur = None;
            }
        }
        loop {
            let q = match cur {
                Some(q) => q,
                None => self.set_in_service(now)?,
            };
            if self.q(q).next_rq.is_some() {
                if self.next_charge(q) as i64 > self.q(q).budget_left(&self.wf) {
                    self.expire(q, false, Expiration::BudgetExhausted, now);
                    cur = None;
                    continue;
                }
                self.qm(q).wait_request = false;
                return Some(q);
            }
            let qu = self.q(q);
            if qu.wait_request || (qu.dispatched > 0 && self.better_to_idle(q)) {
                return None;
            }
            self.expire(q, false, Expiration::NoMoreRequests, now);
            cur = None;
        }
    }

    /// The idle timer fired (`bfq_idle_slice_timer_body`).
    fn idle_timer(&mut self, now: Instant) {
        let Some(q) = self.in_service else { return };
        if !self.q(q).wait_request || now < self.idle_until {
            return;
        }
        self.qm(q).wait_request = false;
        let reason = if self.budget_timed_out(q, now) {
            Expiration::BudgetTimeout
        } else if self.q(q).sorted.is_empty() {
            Expiration::TooIdle
        } else {
            return;
        };
        self.expire(q, true, reason, now);
    }
}

// ---------------------------------------------------------------------------
// Requests inside a queue.
// ---------------------------------------------------------------------------

impl Bfq {
    /// Which of two requests to serve first from head position `last`
    /// (`bfq_choose_req`): sync before async, then metadata before data,
    /// then short forward seeks, backward ones up to `back_seek_max` at
    /// `back_seek_penalty` times the cost.
    fn choose_req(
        &self,
        sorted: &SortedQueue,
        a: Option<RequestId>,
        b: Option<RequestId>,
        last: Sector,
    ) -> Option<RequestId> {
        let (a, b) = match (a, b) {
            (None, b) => return b,
            (a, None) => return a,
            (Some(a), Some(b)) if a == b => return Some(a),
            (Some(a), Some(b)) => (a, b),
        };
        let (ra, rb) = (
            sorted.get(a).expect("queued"),
            sorted.get(b).expect("queued"),
        );
        Some(if self.back_seek.prefers(ra, rb, last) {
            a
        } else {
            b
        })
    }

    /// The request to serve after `last` leaves `q` (`bfq_find_next_rq`):
    /// an expired FIFO head once per slot, else the better neighbour.
    fn find_next_rq(&mut self, q: QueueIdx, last: RequestId, now: Instant) -> Option<RequestId> {
        let qu = self.queues[q as usize].as_mut().expect("live queue");
        if !qu.fifo_checked {
            qu.fifo_checked = true;
            while qu
                .fifo
                .front()
                .is_some_and(|&(_, id)| !qu.sorted.contains(id))
            {
                qu.fifo.pop_front();
            }
            if let Some(&(d, id)) = qu.fifo.front() {
                if id != last && now >= d {
                    return Some(id);
                }
            }
        }
        let qu = self.q(q);
        let r = qu.sorted.get(last).expect("queued");
        let next = qu
            .sorted
            .next_after(last)
            .or_else(|| qu.sorted.first().filter(|&f| f != last));
        let prev = qu.sorted.prev_before(last);
        self.choose_req(&qu.sorted, next, prev, r.sector)
    }

    /// Take `id` out of `q` (`bfq_remove_request`).
    fn remove_request(&mut self, q: QueueIdx, id: RequestId, now: Instant) -> Request {
        if self.q(q).next_rq == Some(id) {
            let next = self.find_next_rq(q, id, now);
            self.qm(q).next_rq = next;
            self.updated_next_req(q);
        }
        let r = self.qm(q).sorted.remove(id).expect("queued request");
        self.queued -= 1;
        let qu = self.q(q);
        if qu.sorted.is_empty() {
            self.qm(q).next_rq = None;
            self.qm(q).fifo.clear();
            if self.q(q).busy && self.in_service != Some(q) {
                self.del_busy(q);
                let e = self.q(q).entity;
                let e = &mut self.wf.es[e as usize];
                e.budget = 0;
                e.service = 0;
            }
            self.pos_remove(q);
        } else {
            self.pos_update(q);
        }
        r
    }

    // Position trees for early queue merging.

    fn pos_remove(&mut self, q: QueueIdx) {
        let qu = self.qm(q);
        if let Some(key) = qu.pos_key.take() {
            let g = qu.group;
            let t = &mut self.groups[g as usize].pos_tree;
            if t.get(&key) == Some(&q) {
                t.remove(&key);
            }
        }
    }

    /// Re-key `q` by its next request (`bfq_pos_tree_add_move`).
    fn pos_update(&mut self, q: QueueIdx) {
        if self.nonrot_with_queueing {
            return;
        }
        let qu = self.q(q);
        let want = if qu.class == Class::Idle || !qu.sync || self.too_late_for_merging(q) {
            None
        } else {
            qu.next_rq
                .and_then(|id| qu.sorted.get(id))
                .map(|r| r.sector)
        };
        if want.is_some() && want == qu.pos_key {
            return; // already keyed there
        }
        self.pos_remove(q);
        let Some(sector) = want else {
            return;
        };
        let qu = self.q(q);
        let g = qu.group;
        let t = &mut self.groups[g as usize].pos_tree;
        if let std::collections::btree_map::Entry::Vacant(v) = t.entry(sector) {
            v.insert(q);
            self.qm(q).pos_key = Some(sector);
        }
    }

    fn too_late_for_merging(&self, q: QueueIdx) -> bool {
        let qu = self.q(q);
        qu.service_from_backlogged > 0 && self.now > qu.first_io_time + MERGE_TIME_LIMIT
    }

    /// A queue whose next request is within `CLOSE_THR` of `sector` (`bfqq_find_close`).
    fn find_close(&self, q: QueueIdx, sector: Sector) -> Option<QueueIdx> {
        let t = &self.groups[self.q(q).group as usize].pos_tree;
        if t.is_empty() {
            return None;
        }
        // The nearest queue at or below `sector` and at or above it, found
        // in one descent: only those within CLOSE_THR can qualify.
        let (mut below, mut above) = (None, None);
        let window = sector.saturating_sub(CLOSE_THR)..=sector.saturating_add(CLOSE_THR);
        for (&s, &x) in t.range(window) {
            if s <= sector {
                below = Some((s, x));
            }
            if s >= sector {
                above = Some((s, x));
                break;
            }
        }
        [below, above]
            .into_iter()
            .flatten()
            .filter(|&(_, x)| x != q)
            .min_by_key(|&(s, _)| s.abs_diff(sector))
            .map(|(_, x)| x)
    }

    fn may_be_close_cooperator(&self, q: QueueIdx, n: QueueIdx) -> bool {
        let (qu, nu) = (self.q(q), self.q(n));
        !self.too_late_for_merging(n)
            && qu.class != Class::Idle
            && qu.class == nu.class
            && !qu.seeky()
            && !nu.seeky()
            && qu.sync
            && nu.sync
    }

    /// Find a queue that `q`'s task should share (`bfq_setup_cooperator`).
    fn setup_cooperator(&mut self, q: QueueIdx, sector: Sector) -> Option<QueueIdx> {
        if self.stable_merge && self.q(q).sync {
            if let Some(n) = self.q(q).new_queue {
                return Some(n);
            }
            if let Some(n) = self.late_stable_merge(q, self.now) {
                return Some(n);
            }
        }
        if self.nonrot_with_queueing || !self.q(q).sync || self.too_late_for_merging(q) {
            return None;
        }
        if let Some(n) = self.q(q).new_queue {
            return Some(n);
        }
        if self.total_busy() <= 1 {
            return None;
        }
        if let Some(s) = self.in_service {
            if s != q
                && sector.abs_diff(self.in_serv_last_pos) <= CLOSE_THR
                && self.q(q).group == self.q(s).group
                && self.may_be_close_cooperator(q, s)
            {
                if let Some(n) = self.setup_merge(q, s) {
                    return Some(n);
                }
            }
        }
        let n = self.find_close(q, sector)?;
        if self.may_be_close_cooperator(q, n) {
            self.setup_merge(q, n)
        } else {
            None
        }
    }

    fn setup_merge(&mut self, q: QueueIdx, mut n: QueueIdx) -> Option<QueueIdx> {
        if self.q(n).tasks == 0 {
            return None;
        }
        while let Some(nn) = self.q(n).new_queue {
            if nn == q {
                return None;
            }
            n = nn;
        }
        if self.q(q).tasks == 0 || self.q(n).tasks == 0 || n == q {
            return None;
        }
        self.qm(q).new_queue = Some(n);
        Some(n)
    }

    /// Redirect `task` from `q` to `n` (`bfq_merge_bfqqs`).
    fn merge_queues(&mut self, task: TaskId, q: QueueIdx, n: QueueIdx, now: Instant) {
        let qu = self.q(q);
        let saved = Saved {
            ttime: qu.ttime,
            io_bound: qu.io_bound,
            short_ttime: qu.short_ttime,
            in_large_burst: qu.in_large_burst,
            wr_coeff: qu.wr_coeff,
            wr_cur_max_time: qu.wr_cur_max_time,
            last_wr_start_finish: qu.last_wr_start_finish,
            wr_start_at_switch_to_srt: qu.wr_start_at_switch_to_srt,
        };
        let io_bound = saved.io_bound;
        let wr = (
            saved.wr_coeff,
            saved.wr_cur_max_time,
            saved.last_wr_start_finish,
            saved.wr_start_at_switch_to_srt,
        );
        self.saved.insert(task, saved);
        if io_bound {
            self.qm(n).io_bound = true;
        }
        // q's waker may inject for the merged tasks too (`bfq_merge_bfqqs`).
        let waker = self.q(q).waker;
        let nu = self.qm(n);
        if nu.waker.is_none() && waker.is_some() && waker != Some(n) {
            nu.waker = waker;
            nu.tentative_waker = None;
        }
        self.qm(q).io_bound = false;
        if self.q(n).wr_coeff == 1 && wr.0 > 1 {
            self.set_wr(n, wr.0, wr.1);
            let nu = self.qm(n);
            nu.last_wr_start_finish = wr.2;
            nu.wr_start_at_switch_to_srt = wr.3;
        }
        if wr.0 > 1 {
            self.set_wr(q, 1, Duration::ZERO);
            self.qm(q).last_wr_start_finish = Some(now);
        }
        let nu = self.qm(n);
        nu.coop = true;
        nu.tasks += 1;
        self.release_task(task, q);
        self.sync_of.insert(task, n);
    }
}

// ---------------------------------------------------------------------------
// Arrivals, dispatches, completions.
// ---------------------------------------------------------------------------

impl Bfq {
    fn update_max_budget(&mut self) {
        if self.user_max_budget == 0 {
            let timeout_ms = self.timeout.nanos() / 1_000_000;
            self.max_budget = ((self.peak.rate * 1000 * timeout_ms) >> RATE_SHIFT).max(32);
        }
    }

    /// Think time, short-think flag and seek history on an arrival
    /// (`bfq_update_io_thinktime`, `bfq_update_has_short_ttime`,
    /// `bfq_update_io_seektime`).
    fn update_stats(&mut self, q: QueueIdx, rq: &Request, now: Instant) {
        let cap = self.slice_idle.mul(2);
        let slice_idle = self.slice_idle;
        let rotational = self.rotational;
        let (rules_61, injection) = (self.rules_61, self.injection);
        let qu = self.qm(q);
        let elapsed = qu.last_end_request.map_or(cap, |t| now.since(t).min(cap));
        qu.ttime.add(elapsed.nanos());
        let mut reset_inject = false;
        if qu.sync
            && qu.class != Class::Idle
            && slice_idle > Duration::ZERO
            && passed(qu.split_time, WR_MIN_IDLE_TIME, now)
        {
            // 6.1 compares the mean with half of slice_idle.
            let threshold = slice_idle.nanos() >> u32::from(rules_61);
            let short = !(qu.tasks == 0 || (qu.ttime.valid() && qu.ttime.mean() > threshold));
            let changed = short != qu.short_ttime;
            qu.short_ttime = short;
            // A limit not measured yet follows the think time
            // (`bfq_update_has_short_ttime`).
            reset_inject = injection
                && changed
                && qu.last_serv_time == Duration::ZERO
                && (now >= qu.decrease_time + INJECT_TTIME_BARRIER || !short);
        }
        let seeky = rq_seeky(rotational, qu.last_request_pos, rq.sector, rq.sectors);
        qu.seek_history = (qu.seek_history << 1) | u32::from(seeky);
        if qu.is_soft_rt() && qu.totally_seeky() {
            self.end_wr(q, now);
        }
        if reset_inject {
            self.reset_inject_limit(q, now);
        }
    }

    /// Queue `rq` in `q` (`bfq_add_request` and `bfq_rq_enqueued`).
    fn add_request(&mut self, q: QueueIdx, rq: Request, now: Instant) {
        let qu = self.q(q);
        if qu.sync && qu.sorted.is_empty() && qu.dispatched == 0 {
            self.first_request(q, now);
        }
        let old_wr = self.q(q).wr_coeff;
        let (id, sync, sectors, end) = (rq.id, rq.sync, rq.sectors, rq.end());
        let deadline = now + self.fifo_expire[usize::from(sync)];
        let last_position = self.peak.last_position;
        let qu = self.qm(q);
        qu.fifo.push_back((deadline, id));
        qu.sorted.insert(rq);
        self.queued += 1;
        let prev = self.q(q).next_rq;
        let next = self.choose_req(&self.q(q).sorted, prev, Some(id), last_position);
        self.qm(q).next_rq = next;
        if prev != next {
            self.pos_update(q);
        }
        let mut interactive = false;
        if !self.q(q).busy {
            interactive = self.idle_busy_switch(q, old_wr, now);
        } else {
            let qu = self.q(q);
            if self.low_latency
                && old_wr == 1
                && !sync
                && passed(qu.last_wr_start_finish, WR_MIN_INTER_ARR_ASYNC, now)
            {
                let d = self.wr_duration();
                self.set_wr(q, WR_COEFF, d);
            }
            if prev != next {
                self.updated_next_req(q);
            }
        }
        let low_latency = self.low_latency;
        let qu = self.qm(q);
        if low_latency && (old_wr == 1 || qu.wr_coeff == 1 || interactive) {
            qu.last_wr_start_finish = Some(now);
        }
        qu.last_request_pos = end;

        // bfq_rq_enqueued: a request for the queue we idle for.
        if self.in_service == Some(q) && self.q(q).wait_request {
            let small = self.q(q).sorted.len() == 1 && sectors < SMALL_REQ;
            let timed_out = self.budget_timed_out(q, now);
            if small && self.idling_boosts_throughput(q) && !timed_out {
                return;
            }
            self.qm(q).wait_request = false;
            if timed_out {
                self.expire(q, false, Expiration::BudgetTimeout, now);
            }
        }
    }

    /// A request merged into `survivor` of `q`, which may have swallowed
    /// the queued `absorbed` too.
    fn merged(&mut self, q: QueueIdx, survivor: RequestId, absorbed: Option<RequestId>) {
        if let Some(gone) = absorbed {
            self.queued -= 1;
            let qu = self.qm(q);
            // The survivor inherits the older deadline: take over its slot.
            if let Some(slot) = qu.fifo.iter_mut().find(|(_, id)| *id == gone) {
                slot.1 = survivor;
            }
            if qu.next_rq == Some(gone) {
                qu.next_rq = Some(survivor);
            }
        }
        let prev = self.q(q).next_rq;
        let next = self.choose_req(
            &self.q(q).sorted,
            prev,
            Some(survivor),
            self.peak.last_position,
        );
        self.qm(q).next_rq = next;
        if prev != next || next == Some(survivor) {
            self.pos_update(q);
            self.updated_next_req(q);
        }
    }

    /// Dispatch `q`'s next request (`bfq_dispatch_rq_from_bfqq`).
    fn dispatch_from(&mut self, q: QueueIdx, now: Instant) -> Request {
        let id = self.q(q).next_rq.expect("selected queue has a request");
        let (sector, sectors) = {
            let r = self.q(q).sorted.get(id).expect("queued");
            (r.sector, r.sectors)
        };
        let charge = self.charge(q, sectors);
        self.queue_served(q, charge, now);
        self.qm(q).dispatched += 1;
        if self
            .peak
            .dispatched(now, sector, sectors, self.rq_in_driver, self.rotational)
        {
            self.update_max_budget();
        }
        if self.in_service == Some(q) {
            self.in_serv_last_pos = self.peak.last_position;
        }
        if self.in_service == Some(q) && self.wait_dispatch {
            self.wait_dispatch = false;
            self.waited_rq = Some(id);
        }
        let rq = self.remove_request(q, id, now);
        self.update_counters(q);
        if self.in_service == Some(q) {
            self.update_wr_data(q, now);
            if self.total_busy() > 1 && self.q(q).class == Class::Idle {
                self.expire(q, false, Expiration::BudgetExhausted, now);
            }
        }
        self.rq_in_driver += 1;
        if !self.shallow.is_empty() {
            for id in rq.ids() {
                self.shallow.remove(&id);
            }
        }
        if !rq.sync {
            self.async_in_driver += 1;
        } else if !rq.is_read() {
            self.sync_writes_in_driver += 1;
        }
        self.in_flight.insert(rq.id, q);
        rq
    }

    /// Learn whether the device queues commands (`bfq_update_hw_tag`).
    fn update_hw_tag(&mut self) {
        self.max_rq_in_driver = self.max_rq_in_driver.max(self.rq_in_driver);
        if self.hw_tag == Some(true) {
            return;
        }
        if self.rq_in_driver as usize + self.queued <= HW_QUEUE_THRESHOLD as usize {
            return;
        }
        if let Some(s) = self.in_service {
            let su = self.q(s);
            if su.short_ttime
                && su.dispatched as usize + su.sorted.len() < HW_QUEUE_THRESHOLD as usize
                && self.rq_in_driver < HW_QUEUE_THRESHOLD
            {
                return;
            }
        }
        self.hw_tag_samples += 1;
        if self.hw_tag_samples <= HW_QUEUE_SAMPLES {
            return;
        }
        let tag = self.max_rq_in_driver > HW_QUEUE_THRESHOLD;
        self.hw_tag = Some(tag);
        self.max_rq_in_driver = 0;
        self.hw_tag_samples = 0;
        self.nonrot_with_queueing = !self.rotational && tag;
    }

    /// Whether `bfq_limit_depth` lets request `id` of `q` into the device:
    /// sync reads always; async I/O and sync writes while fewer than their
    /// share of the tags are in the device. The kernel limits tag
    /// allocation, at arrival, with the share in force then; the engine's
    /// request slots stand for the tags here, so the share caps what the
    /// device holds (where it bites), and a request that arrived while a
    /// raised queue was busy keeps the raised share (`shallow`). Under 6.1's
    /// rules a queue is also held to its weight's share of that depth
    /// (`bfqq_request_over_limit`, in [`modern`]).
    fn depth_allows(&self, q: QueueIdx, id: RequestId, sync: bool, is_read: bool) -> bool {
        if !self.limit_depth {
            return true;
        }
        if sync && is_read {
            return !self.rules_61 || !self.over_share(q, self.nr_requests);
        }
        let raised = usize::from(self.wr_busy > 0 || self.shallow.contains(&id));
        let ((num, shift), in_driver) = if sync {
            (DEPTH_SYNC_WRITE[raised], self.sync_writes_in_driver)
        } else {
            (DEPTH_ASYNC[raised], self.async_in_driver)
        };
        let depth = ((self.nr_requests * num) >> shift).max(1);
        in_driver < depth && !(self.rules_61 && self.over_share(q, depth))
    }

    fn next_rq_allowed(&self, q: QueueIdx) -> bool {
        let qu = self.q(q);
        let id = qu.next_rq.expect("a next request");
        let r = qu.sorted.get(id).expect("queued");
        self.depth_allows(q, id, r.sync, r.is_read())
    }

    fn wait_for_completion(&self, now: Instant) -> Dispatch {
        Dispatch::Wait {
            until: now + self.slice_idle.max(MIN_TT),
        }
    }
}

impl Scheduler for Bfq {
    fn name(&self) -> &'static str {
        self.name
    }

    fn set_groups(&mut self, groups: &GroupTree) {
        // The inherent method: build the group hierarchy from the tree.
        Bfq::set_groups(self, groups);
    }

    fn insert(&mut self, request: Request, now: Instant) {
        self.now = now;
        if self.limit_depth && self.wr_busy > 0 && !(request.sync && request.is_read()) {
            self.shallow.insert(request.id);
        }
        let task = request.task;
        let mut q = self.queue_for(&request, now);
        if request.sync {
            if let Some(n) = self.setup_cooperator(q, request.sector) {
                if let Some(qu) = self.queues[q as usize].as_mut() {
                    qu.just_created = false;
                }
                if self.sync_of.get(&task) == Some(&q) {
                    self.merge_queues(task, q, n, now);
                }
                q = n;
            }
        }
        let rule = self.rule;
        let request = match self.qm(q).sorted.merge(request, &rule) {
            MergeOutcome::Merged {
                survivor,
                absorbed_queued,
            } => {
                self.merged(q, survivor, absorbed_queued);
                return;
            }
            MergeOutcome::None(request) => request,
        };
        self.update_stats(q, &request, now);
        self.apply_prio(q, request.prio);
        self.add_request(q, request, now);
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        self.now = now;
        self.idle_timer(now);
        if self.total_busy() == 0 {
            return Dispatch::Empty;
        }
        if self.strict_guarantees && self.rq_in_driver > 0 {
            // One request at a time in the device.
            return self.wait_for_completion(now);
        }
        match self.select_queue(now) {
            // Over its tag share: a completion of its kind comes first.
            Some(q) if !self.next_rq_allowed(q) => Dispatch::Empty,
            Some(q) => Dispatch::Request(self.dispatch_from(q, now)),
            None => match self.in_service {
                Some(s) => {
                    if let Some(q) = self.choose_for_injection(s, now) {
                        return Dispatch::Request(self.dispatch_from(q, now));
                    }
                    if self.q(s).wait_request {
                        Dispatch::Wait {
                            until: self.idle_until,
                        }
                    } else {
                        self.wait_for_completion(now)
                    }
                }
                None => Dispatch::Empty,
            },
        }
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        self.now = now;
        let Some(q) = self.in_flight.remove(&request.id) else {
            debug_assert!(false, "completion of {:?}, never dispatched", request.id);
            return;
        };
        self.update_hw_tag();
        if self.waited_rq == Some(request.id) {
            self.update_inject_limit(q, now);
        }
        self.rq_in_driver -= 1;
        if !request.sync {
            self.async_in_driver -= 1;
        } else if !request.is_read() {
            self.sync_writes_in_driver -= 1;
        }
        let qu = self.qm(q);
        qu.dispatched -= 1;
        if qu.dispatched == 0 && !qu.busy {
            qu.budget_timeout = Some(now);
        }
        qu.last_end_request = Some(now);
        let coop = qu.coop;
        self.update_counters(q);
        // Shared queues make false wakers (`bfq_completed_request`).
        self.last_completed = (!coop).then_some(q);
        self.last_completion = Some(now);
        if self.peak.completed(now) {
            self.update_max_budget();
        }
        let qu = self.q(q);
        if qu.softrt_update && qu.dispatched == 0 && qu.sorted.is_empty() && qu.wr_coeff != WR_COEFF
        {
            let t = self.softrt_next_start(q, now);
            self.qm(q).soft_rt_next_start = Some(t);
        }
        if self.in_service == Some(q) {
            if self.must_idle(q) {
                if self.q(q).dispatched == 0 {
                    self.arm_idle_timer(q, now);
                }
            } else if self.may_expire_for_budget_timeout(q, now) {
                self.expire(q, false, Expiration::BudgetTimeout, now);
            } else if self.q(q).sorted.is_empty()
                && (self.q(q).dispatched == 0 || !self.better_to_idle(q))
            {
                self.expire(q, false, Expiration::NoMoreRequests, now);
            }
        }
        if self.queues[q as usize].is_some() {
            self.maybe_free(q);
        }
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn task_exited(&mut self, task: TaskId, now: Instant) {
        self.now = now;
        self.saved.remove(&task);
        if let Some(&q) = self.sync_of.get(&task) {
            self.release_task(task, q);
        }
    }

    /// The B-WF2Q+ trees (`Wf2q::check`), and the counts around them:
    /// `queued` is the requests in every queue's sorted list, the busy
    /// count is the queues marked busy, a queue with requests is busy (a
    /// busy one may be empty: `__bfq_bfqq_expire` keeps a preempted queue
    /// busy when idling protects its guarantees), and `rq_in_driver` is
    /// what is in flight.
    fn check_invariants(&self) -> Result<(), String> {
        self.wf.check()?;
        let (mut queued, mut busy, mut dispatched) = (0usize, 0u32, 0u32);
        for (i, qu) in self.queues.iter().enumerate() {
            let Some(qu) = qu else { continue };
            queued += qu.sorted.len();
            dispatched += qu.dispatched;
            if qu.busy {
                busy += 1;
            } else if !qu.sorted.is_empty() {
                return Err(format!(
                    "queue {i} has {} requests but is not busy",
                    qu.sorted.len()
                ));
            }
        }
        if queued != self.queued {
            return Err(format!(
                "queued = {} but the queues hold {queued}",
                self.queued
            ));
        }
        if busy != self.total_busy() {
            return Err(format!(
                "{} busy counted, {busy} queues busy",
                self.total_busy()
            ));
        }
        if dispatched != self.rq_in_driver || self.in_flight.len() != self.rq_in_driver as usize {
            return Err(format!(
                "rq_in_driver = {}, queues count {dispatched} dispatched, {} in flight",
                self.rq_in_driver,
                self.in_flight.len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
