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

mod arrivals;
mod modern;
mod peak;
mod raising;
mod requests;
mod select;
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
