//! blk-wbt: writeback throttling, in front of any policy.
//!
//! After block/blk-wbt.c and the `rq_depth` helpers of block/blk-rq-qos.c
//! (Jens Axboe; Linux 4.10 introduced it, the rules here are those of 6.x,
//! read at torvalds/linux 00c1d298 for blk-wbt.c and 033b667a for
//! blk-rq-qos.c). wbt is loosely CoDel: it watches the latency of reads on
//! the device and limits how many buffered writes may be outstanding, so
//! that writeback cannot fill the device's queue in front of them.
//!
//! - **Which requests it sees** (`bio_to_wbt_flags`, `wbt_should_throttle`):
//!   reads are never held; their issue and completion times are noted
//!   (`last_issue`, `last_comp`). Writes are *tracked* (they take a token
//!   from `inflight` before they reach the policy and give it back when
//!   they complete) unless they are O_DIRECT (`REQ_SYNC | REQ_IDLE`).
//!   Flushes are neither.
//! - **The limit a tracked write must get under** (`get_limit`):
//!   `max_depth` for `REQ_HIPRIO` (any of `REQ_SYNC`, `REQ_META`,
//!   `REQ_PRIO`); `wb_background` when a read was issued or completed in
//!   the last 100 ms (`close_io`); `wb_normal` otherwise. `calc_wb_limits`:
//!   `wb_normal` = ⌈max_depth / 2⌉ and `wb_background` = ⌈max_depth / 4⌉
//!   (`max_depth` and 1 at a depth of 2 or less). A write passes at once iff
//!   no write waits and `inflight` is under its limit; otherwise it waits
//!   in arrival order (`rq_qos_wait`).
//! - **Wake-ups** (`wbt_rqw_done`): when a tracked write completes, the
//!   waiters are woken if `inflight` fell to 0, or fell below the wake
//!   limit by at least `wb_background / 2`; the wake limit is 0 on a device
//!   with a volatile write cache (`QUEUE_FLAG_WC`: "drop further down
//!   before we wake people up"), `wb_normal` otherwise. Woken waiters take
//!   tokens in order until the first one that does not fit
//!   (`rq_qos_wake_function`). A scale-up wakes them too.
//! - **The monitor** (`wb_timer_fn`, `latency_exceeded`): over windows of
//!   `win_nsec` = 100 ms (`RWB_WINDOW_NSEC`), shrunk to 100 ms /
//!   √(scale_step + 1) while scaled down, the blk-stat callback collects
//!   each completed read's and write's device latency (from dispatch,
//!   `io_start_time_ns`). At a window's end: if the oldest read still on
//!   the device (`sync_issue`) has waited longer than the window, or longer
//!   than `min_lat_nsec` with no read completed, or (with at least one read
//!   and `RWB_MIN_WRITE_SAMPLES` = 3 writes) the *minimum* read latency
//!   exceeds `min_lat_nsec`, the window missed and the depth scales down;
//!   a window with both kinds of samples and no miss scales it up; a window
//!   without enough samples scales up if writes ran (completed, or hold
//!   tokens), and otherwise after `RWB_UNKNOWN_BUMP` = 5 such windows
//!   moves one step back toward the centre. The timer is re-armed while
//!   the step is off centre or writes hold tokens.
//! - **Scaling** (`rq_depth_calc_max_depth`, `rq_depth_scale_up/down`):
//!   from `RWB_DEF_DEPTH` = 16 (or the device's queue depth if smaller) a
//!   step down halves `max_depth - 1` (a floor of 1; a hard step down from a
//!   negative step goes straight to 0); a step up below 0 doubles it, up to
//!   ¾ of the queue depth, after which scaling up stops (`scaled_max`).
//!   A queue depth of 1 gives 2 at step 0 and 1 below.
//!
//! `wbt_lat_usec` is the one tunable, with the kernel's defaults
//! (`wbt_default_latency_nsec`): 2 ms on a non-rotational device, 75 ms on
//! a rotational one; 0 turns wbt off. The kernel turns it off by default
//! under bfq (`bfq_init_queue`: `ELEVATOR_FLAG_DISABLE_WBT`,
//! `wbt_disable_default`), under CFQ (4.x's `cfq_registered_queue` called
//! `wbt_disable_default`) and when io.cost is enabled (`ioc_qos_write`):
//! [`disabled_by`] names them.
//!
//! Our request flags, mapped: a read is `WBT_READ`; a write with `sync`
//! and without `noidle` is O_DIRECT (`REQ_SYNC | REQ_IDLE`, the kernel's
//! `REQ_OP_WRITE | REQ_SYNC | REQ_IDLE` for direct I/O) and passes
//! untracked; a write with `sync` and `noidle` (fsync's and the journal's
//! `WB_SYNC_ALL` writes, `REQ_SYNC` without `REQ_IDLE`) or `meta` is
//! tracked at `max_depth`; every other (async) write is writeback, tracked
//! at `wb_background` near reads and `wb_normal` away from them.
//!
//! Simplifications, stated:
//! - None of our writes carries `REQ_BACKGROUND` (the kernel sets it on the
//!   flusher's background and kupdate writeback, `wbc_to_write_flags`,
//!   which then always gets `wb_background`): a request does not say why
//!   the host wrote it. The difference shows only when no read ran in the
//!   last 100 ms.
//! - `wb_recent_wait` (a dirtier slept in `balance_dirty_pages` within the
//!   last second, which lifts writeback to `max_depth` and the wake limit
//!   to `wb_normal`) is taken as false: no such signal reaches the block
//!   layer here. No kswapd writes, no discards.
//! - `close_io`'s jiffies are exact 100 ms; `last_issue` and `last_comp`
//!   start long ago (the kernel sets them when the queue registers, at
//!   boot).
//! - The kernel throttles a bio before it allocates a request; here a held
//!   write is a request and holds a block-layer slot. A held write the
//!   policy merges when it is let through gives its token back at once
//!   and its slot through [`Scheduler::take_freed_slot`]. A tracked write
//!   the policy merges later, coalescing two queued requests, gives its
//!   token back when the survivor completes (the kernel, at the merge).
//! - The timer's window ends are handled at the first call at or after
//!   them (nothing changes between calls, so the decisions are the
//!   same); while writes wait, `dispatch` answers `Wait` until the window's
//!   end, so a scale-up's wake-up comes on time.
//!
//! Invariants: `inflight` equals the number of tracked requests holding a
//! token (in the policy or on the device); only tracked writes are held,
//! in arrival order, and each inserted request reaches the policy exactly
//! once; writes wait only while `inflight` is at least 1 or a wake-up is
//! due; `1 <= max_depth`, and `wb_normal`, `wb_background` are what
//! `calc_wb_limits` gives for `max_depth`.

use super::{GroupLayerType, LateInsert, LayerContext, Layered};
use crate::{Dispatch, Scheduler};
use elevator_core::{Duration, Instant, Op, QueueLimits, Request, RequestId};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::VecDeque;

/// `RWB_DEF_DEPTH`: the write depth at step 0, "we'll scale up (to 75% of
/// QD max) or down (min 1) from here depending on device stats".
pub const RWB_DEF_DEPTH: u32 = 16;
/// `RWB_WINDOW_NSEC`: the monitoring window at step 0 and below.
pub const RWB_WINDOW: Duration = Duration::from_millis(100);
/// `RWB_MIN_WRITE_SAMPLES`: a window needs this many completed writes (and
/// a read) to judge that writes hurt reads.
pub const RWB_MIN_WRITE_SAMPLES: u64 = 3;
/// `RWB_UNKNOWN_BUMP`: windows without enough samples before the step
/// drifts back toward 0.
pub const RWB_UNKNOWN_BUMP: u32 = 5;
/// `wbt_default_latency_nsec` on non-rotational storage: 2 ms.
pub const DEFAULT_LAT_USEC_NONROT: u64 = 2_000;
/// `wbt_default_latency_nsec` on rotational storage: 75 ms.
pub const DEFAULT_LAT_USEC_ROT: u64 = 75_000;
/// `close_io`: reads issued or completed within `HZ / 10` make writeback
/// keep to the background limit.
pub const CLOSE_IO: Duration = Duration::from_millis(100);

/// The kernel's default `wbt_lat_usec` for a device.
pub fn default_lat_usec(rotational: bool) -> u64 {
    if rotational {
        DEFAULT_LAT_USEC_ROT
    } else {
        DEFAULT_LAT_USEC_NONROT
    }
}

/// Policies under which the kernel turns wbt off by default, with the
/// reason a report prints: bfq and its presets (`bfq_init_queue` calls
/// `wbt_disable_default`, and in 6.x sets `ELEVATOR_FLAG_DISABLE_WBT` so
/// that wbt stays off while bfq is the elevator) and every CFQ (the 4.x
/// CFQ, which wbt's 4.10 met, called `wbt_disable_default` from
/// `cfq_registered_queue`; CFQ left the kernel in 5.0).
pub const DISABLED_BY: &[(&str, &str)] = &[
    ("bfq", "bfq"),
    ("bfq-6.1", "bfq"),
    ("cfq", "cfq"),
    ("cfq-2003", "cfq"),
    ("cfq-2.6.32", "cfq"),
    ("cfq-2.6.32-brunelle", "cfq"),
    ("cfq-v10", "cfq"),
];

/// Why the kernel would run `policy` (a registry name) without wbt, if it
/// would.
pub fn disabled_by(policy: &str) -> Option<&'static str> {
    DISABLED_BY
        .iter()
        .find(|(name, _)| *name == policy)
        .map(|(_, why)| *why)
}

/// A run's `[wbt]`, as sysfs takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WbtSpec {
    /// `wbt_lat_usec`: `None` for the kernel's default for the device
    /// (`"default"` or -1, as sysfs takes it), `Some(0)` for off.
    pub lat_usec: Option<u64>,
    /// `write_cache`: "write back" (true, the default) or "write through".
    pub write_cache: bool,
}

/// wbt in the registry: on with a run's `[wbt]`, unless the kernel runs
/// the policy (or io.cost's QoS) without it; shown on the run's settings
/// line either way (`wbt=2000us`, `wbt=off(bfq)`).
pub const TYPE: GroupLayerType = GroupLayerType {
    name: "wbt",
    honours: "-",
    about: "blk-wbt ([wbt]): writeback held to a depth scaled by read latency; off under bfq, cfq",
    keys: &["wbt.lat_usec", "wbt.write_cache"],
    build: |inner, cx: &LayerContext<'_>| match setting(cx) {
        None => Layered::absent(inner),
        Some(Err(why)) => Layered {
            scheduler: inner,
            shown: Some(format!("off({why})")),
        },
        Some(Ok(params)) => Layered {
            shown: Some(if params.write_cache {
                format!("{}us", params.lat_usec)
            } else {
                format!("{}us(write-through)", params.lat_usec)
            }),
            scheduler: Box::new(Wbt::new(inner, cx.limits, params)),
        },
    },
};

/// What `[wbt]` gives the run: wbt's settings, or why the kernel runs it
/// without (`None` without the section).
fn setting(cx: &LayerContext<'_>) -> Option<Result<WbtParams, &'static str>> {
    let spec = cx.settings.wbt?;
    let lat_usec = spec
        .lat_usec
        .unwrap_or_else(|| default_lat_usec(cx.limits.rotational));
    Some(if lat_usec == 0 {
        Err("wbt_lat_usec=0")
    } else if let Some(why) = disabled_by(cx.policy.name) {
        Err(why)
    } else if cx.settings.iocost.as_ref().is_some_and(|ic| ic.qos.enable) {
        // ioc_qos_write: enabling io.cost calls wbt_disable_default.
        Err("iocost")
    } else {
        Ok(WbtParams {
            lat_usec,
            write_cache: spec.write_cache,
        })
    })
}

/// What wbt reads from the queue: `wbt_lat_usec` and `write_cache`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WbtParams {
    /// The read latency target (`min_lat_nsec`, sysfs `wbt_lat_usec`).
    pub lat_usec: u64,
    /// The device has a volatile write cache (`QUEUE_FLAG_WC`, sysfs
    /// `write_cache` = "write back").
    pub write_cache: bool,
}

impl WbtParams {
    /// The kernel's defaults for a device: the latency target by its
    /// rotational flag, and a write cache.
    pub fn default_for(limits: &QueueLimits) -> Self {
        WbtParams {
            lat_usec: default_lat_usec(limits.rotational),
            write_cache: true,
        }
    }
}

/// The kernel's `struct rq_depth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RqDepth {
    queue_depth: u32,
    default_depth: u32,
    max_depth: u32,
    scale_step: i32,
    scaled_max: bool,
}

impl RqDepth {
    fn new(queue_depth: u32) -> Self {
        let mut d = RqDepth {
            queue_depth: queue_depth.max(1),
            default_depth: RWB_DEF_DEPTH,
            max_depth: 0,
            scale_step: 0,
            scaled_max: false,
        };
        d.calc_max_depth();
        d
    }

    /// `rq_depth_calc_max_depth`: true if scaling up can go no further.
    fn calc_max_depth(&mut self) -> bool {
        if self.queue_depth == 1 {
            if self.scale_step > 0 {
                self.max_depth = 1;
                return false;
            }
            self.max_depth = 2;
            return true;
        }
        let depth = self.default_depth.min(self.queue_depth);
        let (depth, at_max) = match self.scale_step {
            0 => (depth, false),
            s if s > 0 => (1 + ((depth - 1) >> s.min(31)), false),
            s => {
                // A step below 0 doubles the depth, up to 3/4 of the queue.
                let maxd = 3 * u64::from(self.queue_depth) / 4;
                let shift = s.unsigned_abs().min(32);
                let d = 1 + (u64::from(depth - 1) << shift);
                if d > maxd {
                    (maxd as u32, true)
                } else {
                    (d as u32, false)
                }
            }
        };
        self.max_depth = depth.max(1);
        at_max
    }

    /// `rq_depth_scale_up`: false if it could not.
    fn scale_up(&mut self) -> bool {
        if self.scaled_max {
            return false;
        }
        self.scale_step -= 1;
        self.scaled_max = self.calc_max_depth();
        true
    }

    /// `rq_depth_scale_down`: false if it could not.
    fn scale_down(&mut self, hard_throttle: bool) -> bool {
        if self.max_depth == 1 {
            return false;
        }
        if self.scale_step < 0 && hard_throttle {
            self.scale_step = 0;
        } else {
            self.scale_step += 1;
        }
        self.scaled_max = false;
        self.calc_max_depth();
        true
    }
}

/// A window's blk-stat samples: reads (count, minimum latency) and writes
/// (count).
#[derive(Clone, Copy, Debug, Default)]
struct Stat {
    reads: u64,
    read_min: Option<Duration>,
    writes: u64,
}

/// `latency_exceeded`'s verdicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    Unknown,
    UnknownWrites,
    Exceeded,
}

/// How wbt treats a request (`bio_to_wbt_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Read,
    Untracked,
    Tracked,
}

fn kind(r: &Request) -> Kind {
    match r.op {
        Op::Read => Kind::Read,
        Op::Flush => Kind::Untracked,
        // O_DIRECT: REQ_SYNC | REQ_IDLE (our `noidle` is the kernel's
        // !REQ_IDLE on a sync write).
        Op::Write if r.sync && !r.noidle => Kind::Untracked,
        Op::Write => Kind::Tracked,
    }
}

/// `int_sqrt`: the integer square root, rounded down.
fn int_sqrt(x: u64) -> u64 {
    let mut r = (x as f64).sqrt() as u64;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

/// A policy behind writeback throttling.
#[derive(Debug)]
pub struct Wbt {
    inner: Box<dyn Scheduler>,
    min_lat: Duration,
    write_cache: bool,
    rqd: RqDepth,
    wb_normal: u32,
    wb_background: u32,
    unknown_cnt: u32,
    cur_win: Duration,
    /// The end of the running window; `None` while the callback is idle.
    window_end: Option<Instant>,
    stat: Stat,
    /// The oldest read on the device (`sync_cookie`, `sync_issue`).
    sync_issue: Option<(RequestId, Instant)>,
    last_issue: Option<Instant>,
    last_comp: Option<Instant>,
    inflight: u32,
    /// Tracked requests holding a token.
    tracked: FxHashSet<RequestId>,
    /// Tracked writes waiting for a token, in arrival order.
    held: VecDeque<Request>,
    /// A wake-up is due: waiters try for tokens at the next `dispatch`.
    woken: bool,
    /// When each read on the device was dispatched.
    issued: FxHashMap<RequestId, Instant>,
    /// Slots of held writes that merged in the inner policy when let out.
    late: LateInsert,
    /// Windows judged, by verdict, and steps taken (for tests and reports).
    verdicts: [u64; 4],
    reason: Option<&'static str>,
}

impl Wbt {
    /// wbt with `params` in front of `inner`, for the device `limits`
    /// describes (`wbt_init`). `params.lat_usec` must not be 0: wbt off is
    /// no layer at all.
    pub fn new(inner: Box<dyn Scheduler>, limits: &QueueLimits, params: WbtParams) -> Self {
        assert!(params.lat_usec > 0, "wbt_lat_usec 0 turns wbt off");
        let rqd = RqDepth::new(limits.queue_depth);
        let mut w = Wbt {
            inner,
            min_lat: Duration::from_micros(params.lat_usec),
            write_cache: params.write_cache,
            rqd,
            wb_normal: 0,
            wb_background: 0,
            unknown_cnt: 0,
            cur_win: RWB_WINDOW,
            window_end: None,
            stat: Stat::default(),
            sync_issue: None,
            last_issue: None,
            last_comp: None,
            inflight: 0,
            tracked: FxHashSet::default(),
            held: VecDeque::new(),
            woken: false,
            issued: FxHashMap::default(),
            late: LateInsert::default(),
            verdicts: [0; 4],
            reason: None,
        };
        w.calc_wb_limits();
        w
    }

    /// (`scale_step`, `max_depth`, `wb_normal`, `wb_background`).
    pub fn depth(&self) -> (i32, u32, u32, u32) {
        (
            self.rqd.scale_step,
            self.rqd.max_depth,
            self.wb_normal,
            self.wb_background,
        )
    }

    /// Tracked writes holding a token.
    pub fn inflight(&self) -> u32 {
        self.inflight
    }

    /// Tracked writes waiting for a token.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Windows judged so far with `verdict`.
    pub fn windows(&self, verdict: Verdict) -> u64 {
        self.verdicts[verdict as usize]
    }

    /// The current window length (`cur_win_nsec`).
    pub fn window(&self) -> Duration {
        self.cur_win
    }

    /// `calc_wb_limits`.
    fn calc_wb_limits(&mut self) {
        let max = self.rqd.max_depth;
        if max <= 2 {
            self.wb_normal = max;
            self.wb_background = 1;
        } else {
            self.wb_normal = max.div_ceil(2);
            self.wb_background = max.div_ceil(4);
        }
    }

    /// `close_io`: a read issued or completed within the last 100 ms.
    fn close_io(&self, now: Instant) -> bool {
        let recent = |t: Option<Instant>| t.is_some_and(|t| now < t + CLOSE_IO);
        recent(self.last_issue) || recent(self.last_comp)
    }

    /// `get_limit` for a tracked write.
    fn limit(&self, r: &Request, now: Instant) -> u32 {
        if r.sync || r.meta {
            self.rqd.max_depth
        } else if self.close_io(now) {
            self.wb_background
        } else {
            self.wb_normal
        }
    }

    /// `rwb_arm_timer`: a new window from `at`, shorter while scaled down.
    fn arm(&mut self, at: Instant) {
        self.cur_win = if self.rqd.scale_step > 0 {
            let root = int_sqrt(((self.rqd.scale_step as u64) + 1) << 8);
            Duration((RWB_WINDOW.nanos() << 4) / root.max(1))
        } else {
            RWB_WINDOW
        };
        self.stat = Stat::default();
        self.window_end = Some(at + self.cur_win);
    }

    /// `latency_exceeded` at the window's end `at`.
    fn verdict(&self, at: Instant) -> Verdict {
        let this_lat = self
            .sync_issue
            .map_or(Duration::ZERO, |(_, issued)| at.since(issued));
        if this_lat > self.cur_win || (this_lat > self.min_lat && self.stat.reads == 0) {
            return Verdict::Exceeded;
        }
        if !(self.stat.reads >= 1 && self.stat.writes >= RWB_MIN_WRITE_SAMPLES) {
            if self.stat.writes > 0 || self.inflight > 0 {
                return Verdict::UnknownWrites;
            }
            return Verdict::Unknown;
        }
        match self.stat.read_min {
            Some(min) if min > self.min_lat => Verdict::Exceeded,
            _ => Verdict::Ok,
        }
    }

    /// `scale_up` of blk-wbt.c: a step up wakes every waiter.
    fn scale_up(&mut self) {
        if !self.rqd.scale_up() {
            return;
        }
        self.calc_wb_limits();
        self.unknown_cnt = 0;
        if !self.held.is_empty() {
            self.woken = true;
        }
    }

    fn scale_down(&mut self, hard_throttle: bool) {
        if !self.rqd.scale_down(hard_throttle) {
            return;
        }
        self.calc_wb_limits();
        self.unknown_cnt = 0;
    }

    /// `wb_timer_fn` at the window's end `at`.
    fn timer(&mut self, at: Instant) {
        let inflight = self.inflight;
        let verdict = self.verdict(at);
        self.verdicts[verdict as usize] += 1;
        match verdict {
            Verdict::Exceeded => self.scale_down(true),
            Verdict::Ok | Verdict::UnknownWrites => self.scale_up(),
            Verdict::Unknown => {
                self.unknown_cnt += 1;
                if self.unknown_cnt >= RWB_UNKNOWN_BUMP {
                    if self.rqd.scale_step > 0 {
                        self.scale_up();
                    } else if self.rqd.scale_step < 0 {
                        self.scale_down(false);
                    }
                }
            }
        }
        if self.rqd.scale_step != 0 || inflight > 0 {
            self.arm(at);
        } else {
            self.window_end = None;
        }
    }

    /// Run the timer for every window that ended by `now`.
    fn catch_up(&mut self, now: Instant) {
        while let Some(end) = self.window_end {
            if end > now {
                break;
            }
            self.timer(end);
        }
    }

    /// `wbt_rqw_done`: a tracked request gave its token back.
    fn done(&mut self) {
        debug_assert!(self.inflight > 0, "wbt: token returned with none out");
        self.inflight -= 1;
        let limit = if self.write_cache { 0 } else { self.wb_normal };
        if self.inflight > 0 && self.inflight >= limit {
            return;
        }
        if !self.held.is_empty() {
            let diff = i64::from(limit) - i64::from(self.inflight);
            if self.inflight == 0 || diff >= i64::from(self.wb_background / 2) {
                self.woken = true;
            }
        }
    }

    /// Hand a tracked write holding a token to the policy. If the policy
    /// merges it, the token goes back at once (the kernel frees the merged
    /// request, `wbt_done`), and a write let through from `held` frees its
    /// block-layer slot.
    fn pass(&mut self, request: Request, from_held: bool, now: Instant) {
        if self.window_end.is_none() {
            self.arm(now);
        }
        self.inflight += 1;
        let id = request.id;
        let before = self.inner.queued();
        if from_held {
            // A merge frees the held write's slot (and one more if it
            // joined two queued requests into one).
            self.late.insert(&mut *self.inner, request, now);
        } else {
            self.inner.insert(request, now);
        }
        if self.inner.queued() > before {
            self.tracked.insert(id);
            return;
        }
        self.done();
    }

    /// Woken waiters take tokens in order until one does not fit.
    fn wake(&mut self, now: Instant) {
        while self.woken {
            self.woken = false;
            while let Some(front) = self.held.front() {
                if self.inflight >= self.limit(front, now) {
                    break;
                }
                let r = self.held.pop_front().expect("non-empty");
                self.pass(r, true, now);
            }
        }
    }
}

impl Scheduler for Wbt {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn insert(&mut self, request: Request, now: Instant) {
        self.catch_up(now);
        match kind(&request) {
            Kind::Read => {
                self.last_issue = Some(now);
                self.inner.insert(request, now);
            }
            Kind::Untracked => self.inner.insert(request, now),
            // A bio merges before it is throttled (`blk_mq_submit_bio`).
            Kind::Tracked if self.inner.would_merge(&request) => self.inner.insert(request, now),
            Kind::Tracked => {
                if self.held.is_empty() && self.inflight < self.limit(&request, now) {
                    self.pass(request, false, now);
                } else {
                    self.held.push_back(request);
                }
            }
        }
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        self.catch_up(now);
        self.wake(now);
        match self.inner.dispatch(now) {
            Dispatch::Request(r) => {
                if r.op == Op::Read {
                    self.issued.insert(r.id, now);
                    if self.sync_issue.is_none() {
                        self.sync_issue = Some((r.id, now));
                    }
                }
                self.reason = None;
                Dispatch::Request(r)
            }
            Dispatch::Wait { until } => Dispatch::Wait {
                until: match self.window_end {
                    Some(end) if !self.held.is_empty() => until.min(end),
                    _ => until,
                },
            },
            Dispatch::Empty => match self.window_end {
                Some(end) if !self.held.is_empty() => {
                    self.reason = Some("wbt: writeback over its depth");
                    Dispatch::Wait { until: end }
                }
                _ => Dispatch::Empty,
            },
        }
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        self.catch_up(now);
        self.inner.complete(request, now);
        let issued = self.issued.remove(&request.id);
        if self.window_end.is_some() {
            match request.op {
                Op::Read => {
                    if let Some(at) = issued {
                        let lat = now.since(at);
                        self.stat.reads += 1;
                        self.stat.read_min = Some(self.stat.read_min.map_or(lat, |m| m.min(lat)));
                    }
                }
                Op::Write => self.stat.writes += 1,
                Op::Flush => {}
            }
        }
        if request.op == Op::Read {
            self.last_comp = Some(now);
        }
        if self.sync_issue.is_some_and(|(id, _)| id == request.id) {
            self.sync_issue = None;
        }
        for id in request.ids() {
            if self.tracked.remove(&id) {
                self.done();
            }
        }
    }

    fn queued(&self) -> usize {
        self.inner.queued() + self.held.len()
    }

    fn would_merge(&self, request: &Request) -> bool {
        self.inner.would_merge(request)
    }

    forward_to_inner!();

    /// The inner policy's bound for each write ahead of a held one, and
    /// for the held one: at most `max_queued` requests wait ahead of it,
    /// and each token comes back within the inner bound plus a service
    /// time, after which the next waiter gets it (the wake limit is at
    /// least 0 and a limit at least 1).
    fn starvation_bound(&self, service: Duration, max_queued: usize) -> Option<Duration> {
        let inner = self.inner.starvation_bound(service, max_queued)?;
        let rounds = max_queued as u64 + 1;
        Some(inner + (inner + service).mul(rounds) + self.cur_win.max(RWB_WINDOW))
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.inner.check_invariants()?;
        if self.inflight as usize != self.tracked.len() {
            return Err(format!(
                "wbt: inflight {} but {} tracked requests hold tokens",
                self.inflight,
                self.tracked.len()
            ));
        }
        if let Some(r) = self.held.iter().find(|r| kind(r) != Kind::Tracked) {
            return Err(format!("wbt: holds {r}, which it does not track"));
        }
        if !self.held.is_empty() && self.inflight == 0 && !self.woken {
            return Err(format!(
                "wbt: {} writes wait with no token out and no wake-up due",
                self.held.len()
            ));
        }
        let max = self.rqd.max_depth;
        let expected = if max <= 2 {
            (max, 1)
        } else {
            (max.div_ceil(2), max.div_ceil(4))
        };
        if max == 0 || (self.wb_normal, self.wb_background) != expected {
            return Err(format!(
                "wbt: max_depth {max} with wb_normal {} and wb_background {}",
                self.wb_normal, self.wb_background
            ));
        }
        Ok(())
    }

    fn dispatch_reason(&self) -> Option<&'static str> {
        self.reason.or_else(|| self.inner.dispatch_reason())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FreedSlot;

    const MS: Duration = Duration::from_millis(1);

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn limits(queue_depth: u32) -> QueueLimits {
        QueueLimits {
            rotational: false,
            queue_depth,
            ..QueueLimits::default()
        }
    }

    fn wbt(write_cache: bool) -> Wbt {
        let l = limits(31);
        let noop = crate::find("noop").unwrap().build_default(&l);
        Wbt::new(
            noop,
            &l,
            WbtParams {
                lat_usec: DEFAULT_LAT_USEC_NONROT,
                write_cache,
            },
        )
    }

    /// An async write far from every other, so that nothing merges.
    fn write(id: u64) -> Request {
        Request::write(id, 1, id * 10_000, 8)
    }

    fn dispatch_all(w: &mut Wbt, now: Instant) -> Vec<Request> {
        let mut out = Vec::new();
        while let Dispatch::Request(r) = w.dispatch(now) {
            out.push(r);
        }
        out
    }

    /// One window from `start`: four writes and a read; the writes
    /// complete 100 us after they are dispatched (those that wait go when
    /// the others are back), the read after `read_lat`. Returns the
    /// window's end, where the next one starts.
    fn window(w: &mut Wbt, start: Instant, next_id: &mut u64, read_lat: Duration) -> Instant {
        let step = Duration::from_micros(100);
        for _ in 0..4 {
            w.insert(write(*next_id), start);
            *next_id += 1;
        }
        let end = start + w.window();
        w.insert(Request::read(*next_id, 2, *next_id * 10_000, 8), start);
        *next_id += 1;
        let mut t = start;
        let mut read = None;
        loop {
            let sent = dispatch_all(w, t);
            let (reads, writes): (Vec<_>, Vec<_>) =
                sent.into_iter().partition(|r| r.op == Op::Read);
            read = read.or(reads.into_iter().next());
            if writes.is_empty() {
                break;
            }
            t += step;
            for r in &writes {
                w.complete(r, t);
            }
        }
        assert!(t < start + read_lat && start + read_lat < end && w.held() == 0);
        w.complete(&read.expect("the read went out"), start + read_lat);
        end
    }

    /// `rq_depth_calc_max_depth` on a 31-tag SATA queue: 16 at step 0,
    /// halving `depth - 1` per step down to 1; one step up from 0 is 31,
    /// capped at 3/4 of the queue (23), after which it stops.
    #[test]
    fn max_depth_follows_the_kernel_table() {
        let mut d = RqDepth::new(31);
        assert_eq!(d.max_depth, 16);
        let mut down = Vec::new();
        while d.scale_down(false) {
            down.push(d.max_depth);
        }
        assert_eq!(down, [8, 4, 2, 1]);
        assert_eq!(d.scale_step, 4);
        let mut d = RqDepth::new(31);
        assert!(d.scale_up());
        assert_eq!((d.max_depth, d.scale_step, d.scaled_max), (23, -1, true));
        assert!(!d.scale_up(), "scaled_max stops it");
        // A hard step down from below 0 goes straight to the centre.
        assert!(d.scale_down(true));
        assert_eq!((d.max_depth, d.scale_step), (16, 0));
        // A queue depth of 1: 2 at the centre, 1 below it.
        let mut one = RqDepth::new(1);
        assert_eq!(one.max_depth, 2);
        assert!(one.scale_down(true));
        assert_eq!(one.max_depth, 1);
        assert!(!one.scale_down(true));
    }

    #[test]
    fn a_window_whose_fastest_read_misses_the_target_scales_down() {
        let mut w = wbt(true);
        assert_eq!(w.depth(), (0, 16, 8, 4));
        let mut id = 1;
        let end = window(&mut w, at(0), &mut id, MS.mul(5));
        assert_eq!(end, at(100));
        w.dispatch(end);
        assert_eq!(w.windows(Verdict::Exceeded), 1);
        assert_eq!(w.depth(), (1, 8, 4, 2));
        // The window shrinks to 100 ms * 16 / int_sqrt(2 << 8) = 1600/22 ms.
        assert_eq!(w.window(), Duration(1_600_000_000 / 22));
        // Two more misses: depth 4, then 2.
        let end = window(&mut w, end, &mut id, MS.mul(5));
        let end = window(&mut w, end, &mut id, MS.mul(5));
        w.dispatch(end);
        assert_eq!(w.depth(), (3, 2, 2, 1));
    }

    #[test]
    fn good_windows_scale_back_up_and_past_the_centre() {
        let mut w = wbt(true);
        let mut id = 1;
        let mut t = at(0);
        for _ in 0..2 {
            t = window(&mut w, t, &mut id, MS.mul(5));
        }
        w.dispatch(t);
        assert_eq!(w.depth().0, 2);
        // Reads at 0.5 ms, within the 2 ms target: one step up per window.
        let mut steps = Vec::new();
        for _ in 0..4 {
            t = window(&mut w, t, &mut id, Duration::from_micros(500));
            w.dispatch(t);
            steps.push(w.depth().0);
        }
        assert_eq!(steps, [1, 0, -1, -1], "capped at 3/4 of the queue");
        assert_eq!(w.depth(), (-1, 23, 12, 6));
        assert_eq!(w.windows(Verdict::Ok), 4);
    }

    /// A read stuck on the device longer than the window is a miss even
    /// when no read completes in it (`rwb_sync_issue_lat`).
    #[test]
    fn a_read_stuck_on_the_device_is_a_miss_without_samples() {
        let mut w = wbt(true);
        w.insert(write(1), at(0));
        w.insert(Request::read(2, 2, 500_000, 8), at(0));
        let sent = dispatch_all(&mut w, at(0));
        assert_eq!(sent.len(), 2);
        w.dispatch(at(100));
        assert_eq!(w.windows(Verdict::Exceeded), 1);
        assert_eq!(w.depth().0, 1);
    }

    #[test]
    fn writeback_near_reads_keeps_to_the_background_limit() {
        // No read for 100 ms: wb_normal (8) writes pass.
        let mut w = wbt(true);
        for id in 1..=20 {
            w.insert(write(id), at(0));
        }
        assert_eq!((w.inflight(), w.held()), (8, 12));
        // A read issued 50 ms ago: wb_background (4).
        let mut w = wbt(true);
        w.insert(Request::read(100, 2, 9_000_000, 8), at(0));
        for id in 1..=20 {
            w.insert(write(id), at(50));
        }
        assert_eq!((w.inflight(), w.held()), (4, 16));
        // Completed reads count too, and their effect lapses after 100 ms.
        let mut w = wbt(true);
        w.insert(Request::read(100, 2, 9_000_000, 8), at(0));
        let Dispatch::Request(r) = w.dispatch(at(0)) else {
            panic!("the read is not held")
        };
        w.complete(&r, at(60));
        w.insert(write(1), at(150));
        assert_eq!(w.limit(&write(2), at(150)), 4);
        assert_eq!(w.limit(&write(2), at(160)), 8);
        // fsync's writes (REQ_SYNC) and metadata go up to max_depth.
        let fsync = Request::write_sync(3, 1, 0, 8);
        assert_eq!(w.limit(&fsync, at(150)), 16);
        let mut meta = write(4);
        meta.meta = true;
        assert_eq!(w.limit(&meta, at(150)), 16);
    }

    #[test]
    fn o_direct_writes_and_flushes_pass_untracked() {
        let mut w = wbt(true);
        for id in 1..=40 {
            let mut direct = write(id);
            direct.sync = true; // REQ_SYNC | REQ_IDLE: no `noidle`
            w.insert(direct, at(0));
        }
        let mut flush = Request::write(41, 1, 0, 0);
        flush.op = Op::Flush;
        w.insert(flush, at(0));
        assert_eq!((w.inflight(), w.held(), w.queued()), (0, 0, 41));
        assert!(
            w.window_end.is_none(),
            "untracked writes do not start the monitor"
        );
    }

    #[test]
    fn reads_are_never_held_and_pass_the_waiting_writes() {
        let mut w = wbt(true);
        for id in 1..=20 {
            w.insert(write(id), at(0));
        }
        assert_eq!(w.held(), 12);
        w.insert(Request::read(100, 2, 9_000_000, 8), at(1));
        assert_eq!(w.held(), 12);
        let sent = dispatch_all(&mut w, at(1));
        assert_eq!(sent.len(), 9, "8 writes with tokens and the read");
        assert_eq!(sent.last().unwrap().op, Op::Read);
        w.check_invariants().unwrap();
    }

    /// With a write cache, waiters are woken only when every token is
    /// back; without one, as soon as `inflight` is `wb_background / 2`
    /// below `wb_normal`.
    #[test]
    fn a_write_cache_makes_waiters_wait_for_every_token() {
        for write_cache in [true, false] {
            let mut w = wbt(write_cache);
            for id in 1..=20 {
                w.insert(write(id), at(0));
            }
            let sent = dispatch_all(&mut w, at(0));
            assert_eq!(sent.len(), 8);
            let mut released_after = None;
            for (i, r) in sent.iter().enumerate() {
                w.complete(r, at(1));
                if !dispatch_all(&mut w, at(1)).is_empty() {
                    released_after = Some(i + 1);
                    break;
                }
            }
            // No cache: inflight 6 is 2 = 4/2 below 8 after two completions.
            let expected = if write_cache { 8 } else { 2 };
            assert_eq!(released_after, Some(expected), "write_cache {write_cache}");
            w.check_invariants().unwrap();
        }
    }

    /// Held writes let through together merge in the policy: each gives its
    /// token back at once and its block-layer slot through
    /// `take_freed_slot`.
    #[test]
    fn a_released_write_that_merges_frees_its_token_and_slot() {
        let mut w = wbt(true);
        // Eight far apart, then eight contiguous ones that wait.
        for id in 1..=8 {
            w.insert(write(id), at(0));
        }
        for k in 0..8u64 {
            w.insert(Request::write(100 + k, 1, 5_000_000 + k * 8, 8), at(0));
        }
        assert_eq!(w.held(), 8);
        let sent = dispatch_all(&mut w, at(0));
        assert!(w.take_freed_slot().is_none());
        for r in &sent {
            w.complete(r, at(1));
        }
        // Woken: the first takes a token and waits in noop; the rest merge
        // into it as they pass, each giving its token back.
        let Dispatch::Request(merged) = w.dispatch(at(1)) else {
            panic!("the held writes were not let through")
        };
        assert_eq!(merged.merged.len(), 7);
        let mut freed = 0;
        while let Some(slot) = w.take_freed_slot() {
            assert_eq!(
                slot,
                FreedSlot {
                    op: Op::Write,
                    sync: false
                }
            );
            freed += 1;
        }
        assert_eq!((freed, w.inflight(), w.held()), (7, 1, 0));
        w.complete(&merged, at(2));
        assert_eq!(w.inflight(), 0);
        w.check_invariants().unwrap();
    }

    #[test]
    fn bfq_and_cfq_run_without_wbt() {
        for ty in crate::registry() {
            let family = ty.name.starts_with("bfq") || ty.name.starts_with("cfq");
            assert_eq!(disabled_by(ty.name).is_some(), family, "{}", ty.name);
        }
        assert_eq!(disabled_by("bfq-6.1"), Some("bfq"));
        assert_eq!(disabled_by("mq-deadline"), None);
    }
}
