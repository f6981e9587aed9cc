//! iocost (`io.cost`): proportional I/O control by a cost model and
//! virtual time, in front of any policy.
//!
//! After block/blk-iocost.c as of Linux 5.9 (Tejun Heo and Andy Newell,
//! 5.4+; the file's opening comment describes the design) and the cgroup
//! v2 documentation (reference notes §7.5). Three parts:
//!
//! - **Cost model** ([`super::iocost_params`]): each request costs a base
//!   (sequential or random: random when it starts more than 16 MiB,
//!   `LCOEF_RANDIO_PAGES` = 4096 pages, from where the group's previous
//!   request ended, `iocg->cursor`) plus a cost per 4 KiB page, in device
//!   time where 1 s = 2^37 vtime units (`calc_vtime_cost_builtin`).
//! - **Vtime distribution**: device vtime advances at `vrate` × wall time
//!   (`ioc_now`). Each active leaf group has a hierarchical weight
//!   (`hweight`: the product down the tree of its `io.weight` over the sum
//!   of its active siblings'), and a request costs `abs_cost /
//!   hweight_inuse` of the group's own vtime. A request passes iff no
//!   earlier one of its group waits and group vtime + cost <= device vtime
//!   (`ioc_rqos_throttle`); otherwise it waits in the group's FIFO until
//!   vtime has advanced enough (`iocg_kick_waitq`, with a quarter of 5 % of
//!   a period of slack, `WAITQ_TIMER_MARGIN_PCT`). A group activating
//!   after idling starts at most `margin` (50 % of a period) behind device
//!   vtime (`iocg_activate`); unused budget beyond that is thrown away at
//!   each period's end.
//! - **Period timer** (`ioc_timer_fn`), every `period_us` = clamp(multi ×
//!   the larger latency target, 1 ms, 1 s) with multi = max((10^6 −
//!   pct ppm)/50000, 2) (`ioc_refresh_period_us`): deactivates idle groups;
//!   measures each group's usage of its hweight; a group using clearly
//!   less (usage × 1.25 + 2 % below hweight_inuse by more than 3 %, with at
//!   least 2 of the last 3 usages recorded) donates by lowering its
//!   `inuse` weight, so active siblings' hweight_inuse rises; a donor with
//!   waiters takes its weight back, and one whose vtime gets within 10 %
//!   of a period of device vtime snaps back at its next request
//!   (`INUSE_MARGIN_PCT`). Then QoS: a period is busy if requests waited
//!   over 5 % of it (`RQ_WAIT_BUSY_PCT`) or the share of reads (writes)
//!   slower than `rlat` (`wlat`) exceeds 1 − `rpct` (`wpct`); busy_level
//!   rises on busy periods and falls on periods under 75 % of every
//!   threshold while some group is short of vtime (and none lags or
//!   donates), and vrate moves by the kernel's `vrate_adj_pct` table
//!   within [`min`, `max`] (4 % per period back into range).
//!
//! Departures, stated: requests, not bios, are charged, in full when they
//! enter (the kernel charges a bio merged into a request its size cost
//! only); requests of the root group, and of a group with active children,
//! pass uncharged as in the kernel, but there is no debt (`abs_vdebt`) since
//! no request here must pass regardless. The kernel's `rq_wait` is the
//! time from a request's allocation (`alloc_time_ns`, taken before the tag
//! wait, so after iocost let the bio through) to its start on the device
//! (`start_time_ns`), added when it completes (`ioc_rqos_done`); here
//! requests hold a block-layer slot before they reach us, so the wait we
//! count is the time a request we let through waits in the inner policy
//! before dispatch (added at completion, as the kernel does).
//! The built-in profile is chosen once (`ioc_autop_idx` without the
//! 10-second stepping between SSD profiles). Donation is 5.9's inuse
//! give-away and take-back; 5.10 replaced it by `transfer_surpluses`,
//! which computes the donors' inuse so that the receivers get exactly the
//! surplus; the effect (a light group's unused share goes to the busy
//! ones) is the same.
//!
//! Invariants: every inserted request is held here (waiting for budget, or
//! let through and ready for the next dispatch) or handed to the inner
//! policy exactly once; only the request being inserted and, in
//! `dispatch`, the ready ones are handed over; a group's vtime never passes device vtime (a
//! request is charged only when its cost fits under it); `inuse <= active`
//! and each parent's child sums equal its active children's weights; a
//! ready request that merges when handed over in `dispatch` gives its
//! block-layer slot back (`group::LateInsert`).

use super::iocost_params::{
    vrate_of_ppm, Lcoefs, ModelSpec, Profile, Qos, QosSpec, VRATE_MIN_PPM, VTIME_PER_NSEC,
    VTIME_PER_USEC,
};
use super::{GroupLayerType, LateInsert, LayerContext, Layered};
use crate::{Dispatch, Scheduler};
use elevator_core::{Duration, GroupId, GroupTree, Instant, Op, QueueLimits, Request, RequestId};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// io.cost in the registry: on with a run's `[iocost]`.
pub const TYPE: GroupLayerType = GroupLayerType {
    name: "io.cost",
    honours: "weights",
    about: "iocost ([iocost]): a cost model and vtime per group hold io.weight, any policy",
    keys: &["iocost.model", "iocost.qos"],
    build: |inner, cx: &LayerContext<'_>| {
        let Some(spec) = &cx.settings.iocost else {
            return Layered::absent(inner);
        };
        Layered {
            scheduler: Box::new(IoCost::new(
                inner,
                cx.groups,
                cx.limits,
                Some(&spec.model),
                Some(&spec.qos),
            )),
            shown: None,
        }
    },
};

const MILLION: u64 = 1_000_000;
/// `MIN_PERIOD` and `MAX_PERIOD`: the timer period's bounds, in µs.
const MIN_PERIOD_US: u64 = 1_000;
const MAX_PERIOD_US: u64 = 1_000_000;
/// `MARGIN_PCT`: a group's vtime may lag device vtime by half a period
/// (its credit).
const MARGIN_PCT: u64 = 50;
/// `INUSE_MARGIN_PCT`: a donor snaps back when within 10 % of a period.
const INUSE_MARGIN_PCT: u64 = 10;
/// `VTIME_VALID_DUR`: a group's vtime is not trusted after 5 minutes idle
/// (the kernel's guard against vtime wrapping while vrate runs high).
const VTIME_VALID_DUR_US: u64 = 300 * 1_000_000;
/// `WAITQ_TIMER_MARGIN_PCT`: slack on a waiter's wake-up (a quarter of it
/// is added so that waiters are woken in chunks).
const WAITQ_TIMER_MARGIN_PCT: u64 = 5;
/// `NR_USAGE_SLOTS` and `MIN_VALID_USAGES`: donation looks at the largest of
/// the last three usages and needs two.
const NR_USAGE_SLOTS: usize = 3;
const MIN_VALID_USAGES: usize = 2;
/// `HWEIGHT_WHOLE`: hierarchical weights are fractions of 2^16.
pub const HWEIGHT_WHOLE: u64 = 1 << 16;
/// `SURPLUS_SCALE_PCT`, `SURPLUS_SCALE_ABS`, `SURPLUS_MIN_ADJ_DELTA`: donate
/// if usage × 1.25 + 2 % is below hweight by more than 3 %.
const SURPLUS_SCALE_PCT: u64 = 125;
const SURPLUS_SCALE_ABS: u64 = HWEIGHT_WHOLE / 50;
const SURPLUS_MIN_ADJ_DELTA: u64 = HWEIGHT_WHOLE / 33;
/// `RQ_WAIT_BUSY_PCT`: waiting over 5 % of a period means saturation.
const RQ_WAIT_BUSY_PCT: u64 = 5;
/// `UNBUSY_THR_PCT`: below 75 % of every threshold counts as idle-ish.
const UNBUSY_THR_PCT: u64 = 75;
/// `MAX_LAGGING_PERIODS`: I/O older than this does not count as lagging.
const MAX_LAGGING_PERIODS: u64 = 10;
/// `VRATE_CLAMP_ADJ_PCT`: approach to [min, max] from outside, per period.
const VRATE_CLAMP_ADJ_PCT: u64 = 4;
/// `LCOEF_RANDIO_PAGES`: further than 16 MiB from the cursor is random.
const LCOEF_RANDIO_PAGES: u64 = 4096;
/// Sectors per 4 KiB page (`IOC_SECT_TO_PAGE_SHIFT` 3).
const SECT_TO_PAGE_SHIFT: u32 = 3;
/// `vrate_adj_pct[]`, indexed by |busy_level|: the vrate step per period.
const VRATE_ADJ_PCT: [u64; 49] = [
    0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4, 8, 8, 8, 8, 16,
];

/// One group's iocost state (the kernel's `ioc_gq`).
#[derive(Debug, Default)]
struct Iocg {
    parent: Option<usize>,
    level: u32,
    weight: u64,
    active: u64,
    inuse: u64,
    last_inuse: u64,
    child_active_sum: u64,
    child_inuse_sum: u64,
    in_active_list: bool,
    cursor: Option<u64>,
    vtime: u64,
    done_vtime: u64,
    last_vtime: u64,
    active_period: u64,
    has_surplus: bool,
    usage_idx: usize,
    usages: [u64; NR_USAGE_SLOTS],
    /// Held requests with their absolute cost, in arrival order.
    waitq: VecDeque<(Request, u64)>,
}

/// A request handed to the inner policy: when (the kernel's
/// `alloc_time_ns`), by whom, at what charge, and when the inner policy
/// dispatched it to the device (`start_time_ns`).
#[derive(Clone, Copy, Debug)]
struct Released {
    group: Option<usize>,
    at: Instant,
    cost: u64,
    started: Option<Instant>,
}

/// A policy behind iocost.
#[derive(Debug)]
pub struct IoCost {
    inner: Box<dyn Scheduler>,
    enabled: bool,
    lcoefs: Lcoefs,
    qos: Qos,
    max_sectors: u32,
    period_us: u64,
    margin_us: u64,
    inuse_margin_vtime: u64,
    vrate: u64,
    vrate_min: u64,
    vrate_max: u64,
    running: bool,
    period_at: Instant,
    period_at_vtime: u64,
    cur_period: u64,
    busy_level: i32,
    groups: Vec<Iocg>,
    held: usize,
    /// Waiters let through outside `dispatch` (by the period timer caught
    /// up in `insert`, or a completion), handed to the inner policy at the
    /// next `dispatch`: a request handed over during another's insert
    /// could merge there and free a slot the engine would charge to the
    /// inserted request's direction.
    ready: VecDeque<Request>,
    /// Slots of ready requests that merged in the inner policy.
    late: LateInsert,
    released: FxHashMap<RequestId, Released>,
    nr_met: [u64; 2],
    nr_missed: [u64; 2],
    rq_wait_ns: u64,
    reason: Option<&'static str>,
}

fn dir(op: Op) -> Option<usize> {
    match op {
        Op::Read => Some(0),
        Op::Write => Some(1),
        Op::Flush => None,
    }
}

impl IoCost {
    /// iocost with `model` and `qos` (each `None` = `ctrl=auto`) in front
    /// of `inner`, for the device described by `limits`.
    pub fn new(
        inner: Box<dyn Scheduler>,
        tree: &GroupTree,
        limits: &QueueLimits,
        model: Option<&ModelSpec>,
        qos: Option<&QosSpec>,
    ) -> Self {
        let profile = Profile::for_device(limits.rotational, limits.queue_depth);
        let model = model.cloned().unwrap_or_default().resolve(&profile);
        let qos_spec = qos.cloned().unwrap_or_default();
        let q = qos_spec.resolve(&profile);
        // ioc_refresh_period_us: the higher latency target sets the period.
        let (ppm, lat) = if q.rlat_us >= q.wlat_us {
            (q.rppm, q.rlat_us)
        } else {
            (q.wppm, q.wlat_us)
        };
        let multi = if ppm != 0 {
            ((MILLION - u64::from(ppm)) / 50_000).max(2)
        } else {
            2
        };
        let period_us = (multi * u64::from(lat)).clamp(MIN_PERIOD_US, MAX_PERIOD_US);
        let mut groups: Vec<Iocg> = tree
            .iter()
            .map(|g| Iocg {
                parent: g.parent.map(|p| p.0 as usize),
                weight: u64::from(g.weight.max(1)),
                ..Iocg::default()
            })
            .collect();
        for i in 0..groups.len() {
            let mut level = 0;
            let mut p = groups[i].parent;
            while let Some(x) = p {
                level += 1;
                p = groups[x].parent;
            }
            groups[i].level = level;
        }
        IoCost {
            inner,
            enabled: qos_spec.enable,
            lcoefs: model.lcoefs(),
            qos: q,
            max_sectors: limits.max_sectors.max(1),
            period_us,
            margin_us: period_us * MARGIN_PCT / 100,
            inuse_margin_vtime: (period_us * VTIME_PER_USEC * INUSE_MARGIN_PCT).div_ceil(100),
            vrate: VTIME_PER_USEC,
            vrate_min: vrate_of_ppm(q.min_ppm, true),
            vrate_max: vrate_of_ppm(q.max_ppm, false),
            running: false,
            period_at: Instant::ZERO,
            period_at_vtime: 0,
            cur_period: 0,
            busy_level: 0,
            groups,
            held: 0,
            ready: VecDeque::new(),
            late: LateInsert::default(),
            released: FxHashMap::default(),
            nr_met: [0; 2],
            nr_missed: [0; 2],
            rq_wait_ns: 0,
            reason: None,
        }
    }

    /// The current vrate in percent of the model's rate.
    pub fn vrate_pct(&self) -> f64 {
        self.vrate as f64 * 100.0 / VTIME_PER_USEC as f64
    }

    /// The timer period (`ioc->period_us`).
    pub fn period(&self) -> Duration {
        Duration::from_micros(self.period_us)
    }

    /// `busy_level` after the last period.
    pub fn busy_level(&self) -> i32 {
        self.busy_level
    }

    /// Group `g`'s (hweight_active, hweight_inuse) as fractions of 1.
    pub fn hweight(&self, g: GroupId) -> (f64, f64) {
        let (a, i) = self.current_hweight(g.0 as usize);
        (
            a as f64 / HWEIGHT_WHOLE as f64,
            i as f64 / HWEIGHT_WHOLE as f64,
        )
    }

    fn vnow(&self, now: Instant) -> u64 {
        let ns = u128::from(now.since(self.period_at).nanos());
        let dv = ns * u128::from(self.vrate) / 1_000;
        self.period_at_vtime
            .saturating_add(u64::try_from(dv).unwrap_or(u64::MAX))
    }

    fn start_period(&mut self, now: Instant) {
        let v = self.vnow(now);
        self.period_at = now;
        self.period_at_vtime = v;
    }

    fn period_end(&self) -> Instant {
        self.period_at + Duration::from_micros(self.period_us)
    }

    /// `current_hweight`: (hweight_active, hweight_inuse) in 1/2^16,
    /// multiplied from the root down as the kernel does (each level's
    /// division truncates).
    fn current_hweight(&self, g: usize) -> (u64, u64) {
        let (hwa, hwi) = self.hweight_above(g);
        (hwa.max(1), hwi.max(1))
    }

    fn hweight_above(&self, g: usize) -> (u64, u64) {
        let Some(p) = self.groups[g].parent else {
            return (HWEIGHT_WHOLE, HWEIGHT_WHOLE);
        };
        let (hwa, hwi) = self.hweight_above(p);
        let (child, parent) = (&self.groups[g], &self.groups[p]);
        if parent.child_active_sum == 0 || parent.child_inuse_sum == 0 {
            return (hwa, hwi);
        }
        (
            hwa * child.active / parent.child_active_sum.max(child.active),
            hwi * child.inuse / parent.child_inuse_sum.max(child.inuse),
        )
    }

    /// `__propagate_weights`: set `g`'s active and inuse weights and update
    /// the sums of its ancestors.
    fn propagate_weights(&mut self, g: usize, active: u64, inuse: u64) {
        let (mut active, mut inuse) = (active, inuse.min(active));
        let mut child = g;
        while let Some(parent) = self.groups[child].parent {
            let (ca, ci) = (self.groups[child].active, self.groups[child].inuse);
            let p = &mut self.groups[parent];
            p.child_active_sum = p.child_active_sum + active - ca;
            p.child_inuse_sum = p.child_inuse_sum + inuse - ci;
            self.groups[child].active = active;
            self.groups[child].inuse = inuse;
            let p = &self.groups[parent];
            let (pa, pi) = if p.child_active_sum != 0 {
                (
                    p.weight,
                    (p.weight * p.child_inuse_sum).div_ceil(p.child_active_sum),
                )
            } else {
                (0, 0)
            };
            if p.parent.is_none() || (pa == p.active && pi == p.inuse) {
                break;
            }
            active = pa;
            inuse = pi;
            child = parent;
        }
    }

    /// `iocg_activate`: whether requests of `g` are controlled.
    fn activate(&mut self, g: usize, now: Instant) -> bool {
        if self.groups[g].in_active_list {
            self.groups[g].active_period = self.cur_period;
            return true;
        }
        // Root-level and internal-node I/O passes (leaf-only constraint).
        if self.groups[g].level == 0 || self.groups[g].child_active_sum != 0 {
            return false;
        }
        // The period stamp moves even if an active ancestor refuses the
        // activation below, as in the kernel.
        let last_period = self.groups[g].active_period;
        self.groups[g].active_period = self.cur_period;
        let mut p = self.groups[g].parent;
        while let Some(x) = p {
            if self.groups[x].in_active_list {
                return false;
            }
            p = self.groups[x].parent;
        }
        if !self.running {
            self.running = true;
            self.start_period(now);
        }
        let vnow = self.vnow(now);
        let vmin = vnow.saturating_sub(self.margin_us * self.vrate);
        let max_period_delta = VTIME_VALID_DUR_US.div_ceil(self.period_us);
        let group = &mut self.groups[g];
        if group.vtime < vmin {
            let d = vmin - group.vtime;
            group.vtime += d;
            group.done_vtime += d;
        } else if last_period + max_period_delta < self.cur_period {
            // Idle longer than VTIME_VALID_DUR: its vtime is not trusted
            // and restarts at vmin, even if that moves it back (an idle
            // group has nothing in flight, so done_vtime == vtime).
            let d = group.vtime - vmin;
            group.vtime = vmin;
            group.done_vtime = group.done_vtime.saturating_sub(d);
        }
        group.in_active_list = true;
        group.last_vtime = group.vtime;
        let (w, last) = (group.weight, group.last_inuse);
        self.propagate_weights(g, w, if last != 0 { last } else { w });
        true
    }

    /// The absolute cost of `r` for group `g` (`calc_vtime_cost_builtin`).
    fn abs_cost(&self, r: &Request, g: usize) -> u64 {
        let c = &self.lcoefs;
        let (seqio, randio, page) = match r.op {
            Op::Read => (c.rseqio, c.rrandio, c.rpage),
            Op::Write => (c.wseqio, c.wrandio, c.wpage),
            Op::Flush => return 0,
        };
        let pages = u64::from(r.sectors >> SECT_TO_PAGE_SHIFT).max(1);
        let seek_pages = self.groups[g]
            .cursor
            .map_or(0, |c| r.sector.abs_diff(c) >> SECT_TO_PAGE_SHIFT);
        let base = if seek_pages > LCOEF_RANDIO_PAGES {
            randio
        } else {
            seqio
        };
        base + pages * page
    }

    fn cost_of(abs_cost: u64, hw_inuse: u64) -> u64 {
        let c = u128::from(abs_cost) * u128::from(HWEIGHT_WHOLE);
        u64::try_from(c.div_ceil(u128::from(hw_inuse))).unwrap_or(u64::MAX)
    }

    /// Hand `r` to the inner policy. Its arrival becomes `now`: in the
    /// kernel the request is allocated (`alloc_time_ns`) after iocost let
    /// the bio through, so the elevator's FIFO deadlines start here.
    fn release(&mut self, mut r: Request, group: Option<usize>, cost: u64, now: Instant) {
        r.arrival = now;
        self.note_release(&r, group, cost, now);
        self.inner.insert(r, now);
    }

    fn note_release(&mut self, r: &Request, group: Option<usize>, cost: u64, now: Instant) {
        self.released.insert(
            r.id,
            Released {
                group,
                at: now,
                cost,
                started: None,
            },
        );
    }

    /// `iocg_kick_waitq`: let through the waiters whose cost fits in the
    /// group's budget; returns when the next one will fit, if any waits.
    fn kick_waitq(&mut self, g: usize, now: Instant) -> Option<Instant> {
        if self.groups[g].waitq.is_empty() {
            return None;
        }
        let (_, hwi) = self.current_hweight(g);
        let vnow = self.vnow(now);
        let mut budget = i128::from(vnow) - i128::from(self.groups[g].vtime);
        while let Some(&(_, abs)) = self.groups[g].waitq.front() {
            let cost = Self::cost_of(abs, hwi);
            if budget < i128::from(cost) {
                let shortage = u64::try_from(i128::from(cost) - budget).unwrap_or(u64::MAX);
                let us = shortage.div_ceil(self.vrate.max(1));
                let margin_ns = self.period_us * WAITQ_TIMER_MARGIN_PCT / 100 * 1_000;
                return Some(now + Duration::from_micros(us) + Duration(margin_ns / 4));
            }
            budget -= i128::from(cost);
            let (mut r, _) = self.groups[g].waitq.pop_front().expect("front exists");
            self.held -= 1;
            self.groups[g].vtime += cost;
            r.arrival = now;
            self.note_release(&r, Some(g), cost, now);
            self.ready.push_back(r);
        }
        None
    }

    /// Run the period timer for every period that ended by `now`, each at
    /// its own end, as the kernel's timer would have fired.
    fn catch_up(&mut self, now: Instant) {
        while self.running && self.period_end() <= now {
            let t = self.period_end();
            self.timer_fn(t);
        }
    }

    /// `ioc_timer_fn` at time `t`.
    fn timer_fn(&mut self, t: Instant) {
        // ioc_lat_stat
        let missed_ppm: [u64; 2] = std::array::from_fn(|rw| {
            let n = self.nr_met[rw] + self.nr_missed[rw];
            if n == 0 {
                0
            } else {
                (self.nr_missed[rw] * MILLION).div_ceil(n)
            }
        });
        let rq_wait_pct = self.rq_wait_ns * 100 / (self.period_us * 1_000);
        self.nr_met = [0; 2];
        self.nr_missed = [0; 2];
        self.rq_wait_ns = 0;

        let vnow = self.vnow(t);
        let period_vtime = vnow - self.period_at_vtime;
        if period_vtime == 0 {
            self.start_period(t);
            return;
        }
        let ppm_rthr = MILLION - u64::from(self.qos.rppm);
        let ppm_wthr = MILLION - u64::from(self.qos.wppm);

        // Kick waiters, deactivate idle groups.
        for g in 0..self.groups.len() {
            if !self.groups[g].in_active_list {
                continue;
            }
            if !self.groups[g].waitq.is_empty() {
                self.kick_waitq(g, t);
            } else if self.groups[g].active_period != self.cur_period
                && self.groups[g].done_vtime == self.groups[g].vtime
            {
                self.groups[g].last_inuse = self.groups[g].inuse;
                self.propagate_weights(g, 0, 0);
                self.groups[g].in_active_list = false;
            }
        }

        let (mut nr_surpluses, mut nr_shortages, mut nr_lagging) = (0, 0, 0);
        let vmargin = self.margin_us * self.vrate;
        let vmin = vnow.saturating_sub(vmargin);
        for g in 0..self.groups.len() {
            if !self.groups[g].in_active_list {
                continue;
            }
            let (hwa, hwi) = self.current_hweight(g);
            let waiting = !self.groups[g].waitq.is_empty();
            let grp = &mut self.groups[g];
            let (vdone, vtime) = (grp.done_vtime, grp.vtime);
            if (ppm_rthr != MILLION || ppm_wthr != MILLION)
                && vtime > vdone
                && vtime > vnow.saturating_sub(MAX_LAGGING_PERIODS * period_vtime)
                && vdone < vnow - period_vtime
            {
                nr_lagging += 1;
            }
            // last_vtime may run ahead of vnow after a waiting period was
            // followed by one that threw budget away; the kernel's wrapping
            // u64 would read that as a huge usage, we read it as none.
            let mut vusage = if waiting {
                vnow.saturating_sub(grp.last_vtime)
            } else {
                vtime.saturating_sub(grp.last_vtime)
            };
            grp.last_vtime += vusage;
            vusage = vusage.max(vtime - vdone);
            let usage = if vusage != 0 {
                let u = (u128::from(vusage) * u128::from(hwi)).div_ceil(u128::from(period_vtime));
                let u = u64::try_from(u).unwrap_or(u64::MAX);
                grp.usage_idx = (grp.usage_idx + 1) % NR_USAGE_SLOTS;
                grp.usages[grp.usage_idx] = u;
                u
            } else {
                0
            };
            grp.has_surplus = false;
            if !waiting && vtime < vmin {
                let d = vmin - vtime;
                grp.vtime += d;
                grp.done_vtime += d;
                grp.last_vtime += d;
                if surplus_adjusted_hweight_inuse(usage, hwi).is_some() {
                    grp.has_surplus = true;
                    nr_surpluses += 1;
                }
            } else if hwi < hwa {
                let new_hwi = if waiting {
                    hwa
                } else {
                    hwi.max(usage * SURPLUS_SCALE_PCT / 100 + SURPLUS_SCALE_ABS)
                };
                let new_inuse = (grp.inuse * new_hwi / hwi).clamp(1, grp.active.max(1));
                if new_inuse > grp.inuse {
                    let w = grp.weight;
                    self.propagate_weights(g, w, new_inuse);
                }
            } else {
                nr_shortages += 1;
            }
        }

        if nr_shortages != 0 && nr_surpluses != 0 {
            for g in 0..self.groups.len() {
                let grp = &self.groups[g];
                if !grp.in_active_list || !grp.has_surplus {
                    continue;
                }
                let valid = grp.usages.iter().filter(|&&u| u != 0).count();
                if valid < MIN_VALID_USAGES {
                    continue;
                }
                let usage = grp.usages.iter().copied().max().unwrap_or(0);
                let (_, hwi) = self.current_hweight(g);
                let Some(new_hwi) = surplus_adjusted_hweight_inuse(usage, hwi) else {
                    continue;
                };
                let grp = &self.groups[g];
                let new_inuse = (grp.inuse * new_hwi).div_ceil(hwi);
                if new_inuse < grp.inuse {
                    let w = grp.weight;
                    self.propagate_weights(g, w, new_inuse.max(1));
                }
            }
        }

        // busy_level from the QoS signals.
        let missed = |rw: usize, thr: u64| missed_ppm[rw] > thr;
        let under = |rw: usize, thr: u64| missed_ppm[rw] <= thr * UNBUSY_THR_PCT / 100;
        if rq_wait_pct > RQ_WAIT_BUSY_PCT || missed(0, ppm_rthr) || missed(1, ppm_wthr) {
            self.busy_level = self.busy_level.max(0) + 1;
        } else if rq_wait_pct <= RQ_WAIT_BUSY_PCT * UNBUSY_THR_PCT / 100
            && under(0, ppm_rthr)
            && under(1, ppm_wthr)
        {
            if nr_shortages != 0 {
                self.busy_level = self.busy_level.min(0);
                if nr_lagging == 0 && nr_surpluses == 0 {
                    self.busy_level -= 1;
                }
            } else {
                self.busy_level = 0;
            }
        } else {
            self.busy_level = 0;
        }
        self.busy_level = self.busy_level.clamp(-1000, 1000);

        if self.busy_level > 0 || (self.busy_level < 0 && nr_lagging == 0) {
            let mut vrate = self.vrate;
            let vrate_min = if rq_wait_pct > RQ_WAIT_BUSY_PCT {
                vrate_of_ppm(VRATE_MIN_PPM, false)
            } else {
                self.vrate_min
            };
            if vrate < vrate_min {
                vrate = (vrate * (100 + VRATE_CLAMP_ADJ_PCT) / 100).min(vrate_min);
            } else if vrate > self.vrate_max {
                vrate = (vrate * (100 - VRATE_CLAMP_ADJ_PCT) / 100).max(self.vrate_max);
            } else {
                let idx = (self.busy_level.unsigned_abs() as usize).min(VRATE_ADJ_PCT.len() - 1);
                let adj = VRATE_ADJ_PCT[idx];
                let adj = if self.busy_level > 0 {
                    100 - adj
                } else {
                    100 + adj
                };
                vrate = (u128::from(vrate) * u128::from(adj)).div_ceil(100) as u64;
                vrate = vrate.clamp(vrate_min, self.vrate_max);
            }
            self.vrate = vrate.max(1);
            self.inuse_margin_vtime =
                (self.period_us * self.vrate * INUSE_MARGIN_PCT).div_ceil(100);
        }

        self.cur_period += 1;
        if self.groups.iter().any(|g| g.in_active_list) {
            self.start_period(t);
        } else {
            // Keep vtime continuous while the timer is stopped.
            self.start_period(t);
            self.busy_level = 0;
            self.running = false;
        }
    }

    /// The earliest time a held request could pass (or the period timer
    /// could change vrate for it).
    fn next_wake(&mut self, now: Instant) -> Option<Instant> {
        if self.held == 0 {
            return None;
        }
        let mut wake: Option<Instant> = None;
        for g in 0..self.groups.len() {
            if let Some(t) = self.kick_waitq(g, now) {
                wake = Some(wake.map_or(t, |w| w.min(t)));
            }
        }
        if self.held == 0 {
            return None;
        }
        let tick = self.period_end();
        Some(wake.map_or(tick, |w| w.min(tick)).max(now + Duration(1)))
    }

    fn group_of(&self, r: &Request) -> usize {
        let g = r.group.0 as usize;
        if g < self.groups.len() {
            g
        } else {
            0
        }
    }
}

/// `surplus_adjusted_hweight_inuse`: usage with margin, if the surplus is
/// worth donating.
fn surplus_adjusted_hweight_inuse(usage: u64, hw_inuse: u64) -> Option<u64> {
    let usage = (usage * SURPLUS_SCALE_PCT).div_ceil(100) + SURPLUS_SCALE_ABS;
    if usage + SURPLUS_MIN_ADJ_DELTA > hw_inuse {
        None
    } else {
        Some(usage)
    }
}

impl Scheduler for IoCost {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn insert(&mut self, request: Request, now: Instant) {
        if !self.enabled {
            self.inner.insert(request, now);
            return;
        }
        self.catch_up(now);
        let g = self.group_of(&request);
        if !self.activate(g, now) {
            self.release(request, None, 0, now);
            return;
        }
        let abs_cost = self.abs_cost(&request, g);
        if abs_cost == 0 {
            self.release(request, None, 0, now);
            return;
        }
        self.groups[g].cursor = Some(request.sector + u64::from(request.sectors));
        let vnow = self.vnow(now);
        let (mut hwa, mut hwi) = self.current_hweight(g);
        if hwi < hwa && self.groups[g].vtime.saturating_add(self.inuse_margin_vtime) >= vnow {
            // A donor running out of margin takes its weight back.
            let w = self.groups[g].weight;
            self.propagate_weights(g, w, w);
            (hwa, hwi) = self.current_hweight(g);
        }
        debug_assert!(hwi <= HWEIGHT_WHOLE && hwa <= HWEIGHT_WHOLE);
        let cost = Self::cost_of(abs_cost, hwi);
        let grp = &mut self.groups[g];
        if grp.waitq.is_empty() && grp.vtime.saturating_add(cost) <= vnow {
            grp.vtime += cost;
            self.release(request, Some(g), cost, now);
        } else {
            grp.waitq.push_back((request, abs_cost));
            self.held += 1;
        }
    }

    fn dispatch(&mut self, now: Instant) -> Dispatch {
        if !self.enabled {
            return self.inner.dispatch(now);
        }
        self.catch_up(now);
        let wake = self.next_wake(now);
        while let Some(r) = self.ready.pop_front() {
            self.late.insert(&mut *self.inner, r, now);
        }
        match self.inner.dispatch(now) {
            Dispatch::Request(r) => {
                if let Some(rel) = self.released.get_mut(&r.id) {
                    rel.started = Some(now);
                }
                self.reason = None;
                Dispatch::Request(r)
            }
            Dispatch::Wait { until } => Dispatch::Wait {
                until: wake.map_or(until, |w| w.min(until)),
            },
            Dispatch::Empty => match wake {
                Some(until) => {
                    self.reason = Some("iocost: group out of vtime budget");
                    Dispatch::Wait { until }
                }
                None => Dispatch::Empty,
            },
        }
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        self.inner.complete(request, now);
        if !self.enabled {
            return;
        }
        self.catch_up(now);
        let mut first: Option<Released> = None;
        let mut started: Option<Instant> = None;
        for id in std::iter::once(request.id).chain(request.merged.iter().copied()) {
            if let Some(rel) = self.released.remove(&id) {
                if let Some(g) = rel.group {
                    self.groups[g].done_vtime += rel.cost;
                }
                started = started.or(rel.started);
                first = Some(match first {
                    Some(f) if f.at <= rel.at => f,
                    _ => rel,
                });
            }
        }
        // ioc_rqos_done: met if the time since allocation, less the
        // request's size cost, is within the direction's target; and the
        // time from allocation to dispatch (`start_time_ns - alloc_time_ns`)
        // is added to rq_wait. Both only for reads and writes (the kernel
        // returns before either for other operations), both in the period
        // the request completes in.
        if let (Some(rel), Some(rw)) = (first, dir(request.op)) {
            if let Some(started) = started {
                self.rq_wait_ns += started.since(rel.at).nanos();
            }
            let on_q = now.since(rel.at).nanos();
            let pages = u64::from(request.sectors >> SECT_TO_PAGE_SHIFT);
            let page = if rw == 0 {
                self.lcoefs.rpage
            } else {
                self.lcoefs.wpage
            };
            let size_nsec = pages * page / VTIME_PER_NSEC;
            let lat_us = if rw == 0 {
                self.qos.rlat_us
            } else {
                self.qos.wlat_us
            };
            if on_q <= size_nsec || on_q - size_nsec <= u64::from(lat_us) * 1_000 {
                self.nr_met[rw] += 1;
            } else {
                self.nr_missed[rw] += 1;
            }
        }
    }

    fn queued(&self) -> usize {
        self.inner.queued() + self.held + self.ready.len()
    }

    forward_to_inner!();

    /// The inner policy's bound plus the longest a request can be held
    /// here: every request queued ahead of it in its group (at most
    /// `max_queued`, each at most a random I/O of `max_sectors`) paid for
    /// at the group's smallest hweight (all siblings active, no donation)
    /// and vrate's floor of 1 %, plus two periods (a donor's take-back
    /// waits for the timer) and the wake-up slack.
    fn starvation_bound(&self, service: Duration, max_queued: usize) -> Option<Duration> {
        let inner = self.inner.starvation_bound(service, max_queued)?;
        if !self.enabled {
            return Some(inner);
        }
        let c = &self.lcoefs;
        let pages = u64::from(self.max_sectors >> SECT_TO_PAGE_SHIFT).max(1);
        let max_abs = c.rrandio.max(c.rseqio) + pages * c.rpage;
        let max_abs = max_abs.max(c.wrandio.max(c.wseqio) + pages * c.wpage);
        let mut hwa_floor = HWEIGHT_WHOLE;
        for (i, g) in self.groups.iter().enumerate() {
            if g.level == 0 {
                continue;
            }
            let mut hw = HWEIGHT_WHOLE;
            let mut x = i;
            while let Some(p) = self.groups[x].parent {
                let sum: u64 = self
                    .groups
                    .iter()
                    .filter(|s| s.parent == Some(p))
                    .map(|s| s.weight)
                    .sum();
                hw = hw * self.groups[x].weight / sum.max(1);
                x = p;
            }
            hwa_floor = hwa_floor.min(hw.max(1));
        }
        let per_request = Self::cost_of(max_abs, hwa_floor);
        let vtime = u128::from(per_request) * (max_queued as u128 + 1);
        let vrate_floor = u128::from(vrate_of_ppm(VRATE_MIN_PPM, false).max(1));
        let held_us = vtime.div_ceil(vrate_floor);
        let held = Duration::from_micros(u64::try_from(held_us).unwrap_or(u64::MAX / 2_000));
        Some(inner + held + Duration::from_micros(3 * self.period_us))
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.inner.check_invariants()?;
        let held: usize = self.groups.iter().map(|g| g.waitq.len()).sum();
        if held != self.held {
            return Err(format!(
                "iocost: {held} requests held, count says {}",
                self.held
            ));
        }
        for (i, g) in self.groups.iter().enumerate() {
            if g.inuse > g.active {
                return Err(format!(
                    "iocost: group {i} inuse {} > active {}",
                    g.inuse, g.active
                ));
            }
            if g.done_vtime > g.vtime {
                return Err(format!("iocost: group {i} done vtime passed its vtime"));
            }
            let (a, u) = self
                .groups
                .iter()
                .filter(|c| c.parent == Some(i))
                .fold((0, 0), |(a, u), c| (a + c.active, u + c.inuse));
            if (a, u) != (g.child_active_sum, g.child_inuse_sum) {
                return Err(format!(
                    "iocost: group {i} child sums ({}, {}) but children hold ({a}, {u})",
                    g.child_active_sum, g.child_inuse_sum
                ));
            }
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
    use crate::harness::{
        Case, DeviceSpec, Layout, Options, Phase, Run, Service, TaskScript, Workload, REGION,
    };
    use elevator_core::{IoMax, TaskId};

    fn limits() -> QueueLimits {
        QueueLimits {
            rotational: false,
            queue_depth: 32,
            ..QueueLimits::default()
        }
    }

    #[test]
    fn period_follows_the_latency_target_and_percentile() {
        let tree = GroupTree::default();
        let noop = crate::find("noop").unwrap().build_default(&limits());
        // Default SSD profile: 25 ms, no percentile: 2 × 25 ms.
        let c = IoCost::new(noop, &tree, &limits(), None, None);
        assert_eq!(c.period(), Duration::from_millis(50));
        let q: QosSpec = "rpct=50 rlat=10000 wlat=5000".parse().unwrap();
        let noop = crate::find("noop").unwrap().build_default(&limits());
        let c = IoCost::new(noop, &tree, &limits(), None, Some(&q));
        // (10^6 - 500000) / 50000 = 10 × 10 ms.
        assert_eq!(c.period(), Duration::from_millis(100));
    }

    /// `ioc_rqos_done` adds a request's wait between allocation and
    /// dispatch to rq_wait when it completes, in the period it completes
    /// in, and only for reads and writes.
    #[test]
    fn rq_wait_counts_at_completion_for_reads_and_writes_only() {
        // From 1 s on: at time zero device vtime is zero and a group has
        // no margin to start with.
        let ms = |m: u64| Instant::ZERO + Duration::from_millis(1000 + m);
        for op in [Op::Read, Op::Write, Op::Flush] {
            let mut tree = GroupTree::default();
            let a = tree.add("a", GroupId::ROOT, 100, IoMax::default());
            let noop = crate::find("noop").unwrap().build_default(&limits());
            // Default SSD parameters: no latency target, a 50 ms period.
            let mut c = IoCost::new(noop, &tree, &limits(), None, None);
            assert_eq!(c.period(), Duration::from_millis(50));
            let mut first = Request::read(1, 1, 0, 8);
            first.op = op;
            first.group = a;
            c.insert(first, ms(0));
            // Let through at once, it waits 40 ms (80 % of the period) in
            // the inner policy and completes after the first period ends.
            let Dispatch::Request(first) = c.dispatch(ms(40)) else {
                panic!("the request was not let through");
            };
            assert!(matches!(c.dispatch(ms(55)), Dispatch::Empty));
            assert_eq!(c.busy_level(), 0, "{op:?}: counted at dispatch");
            let mut second = Request::read(2, 1, 1 << 20, 8);
            second.group = a;
            c.insert(second, ms(55));
            c.complete(&first, ms(60));
            assert!(matches!(c.dispatch(ms(101)), Dispatch::Request(_)));
            let busy = if op == Op::Flush { 0 } else { 1 };
            assert_eq!(c.busy_level(), busy, "{op:?}");
            c.check_invariants().unwrap();
        }
    }

    #[test]
    fn a_group_ahead_of_device_vtime_waits_and_weights_split_the_budget() {
        let mut tree = GroupTree::default();
        let a = tree.add("a", GroupId::ROOT, 100, IoMax::default());
        let b = tree.add("b", GroupId::ROOT, 300, IoMax::default());
        let model: ModelSpec = "ctrl=user rbps=400000000 rseqiops=1000 rrandiops=1000"
            .parse()
            .unwrap();
        let noop = crate::find("noop").unwrap().build_default(&limits());
        let c = IoCost::new(noop, &tree, &limits(), Some(&model), None);
        // Both groups flood at once, a second in, with random reads (none
        // starts where the previous one ended); the device serves each in
        // a nanosecond, so only iocost holds them back.
        let flood = |task: u32, group: GroupId| {
            let all = Phase {
                burst: true,
                ..Phase::reads(400, 8, Layout::Strided { stride: 1 << 10 })
            };
            TaskScript {
                group,
                start: Duration::from_secs(1),
                ..TaskScript::new(task, REGION * u64::from(task), vec![all])
            }
        };
        let case = Case {
            workload: Workload {
                tasks: vec![flood(1, a), flood(2, b)],
            },
            device: DeviceSpec {
                limits: limits(),
                service: Service::Uniform {
                    min: Duration(1),
                    max: Duration(1),
                },
                seed: 0,
            },
        };
        let mut run = Run::new(Box::new(c), &case, &Options::default());
        let now = Instant::ZERO + Duration::from_secs(1);
        run.run_until(now).unwrap_or_else(|v| panic!("{v}"));
        // hweights 1/4 and 3/4.
        let (ha, _) = run.policy().hweight(a);
        let (hb, _) = run.policy().hweight(b);
        assert!(
            (ha - 0.25).abs() < 0.01 && (hb - 0.75).abs() < 0.01,
            "{ha} {hb}"
        );
        // Each random read costs 1 ms of device time; over 200 ms at 100 %
        // the groups get about 50 and 150 ms / cost-per-hweight.
        let end = now + Duration::from_millis(200);
        run.run_until(end).unwrap_or_else(|v| panic!("{v}"));
        run.finish().unwrap_or_else(|v| panic!("{v}"));
        let done = [1, 2].map(|t| run.stats(TaskId(t)).requests());
        println!("served in 200 ms: a (100) {}, b (300) {}", done[0], done[1]);
        // The first margin's credit (half a period) lets each start with
        // about 25 ms; then 1:3.
        assert!(done[1] > 2 * done[0], "{done:?}");
        assert!(done[0] >= 10 && done[1] >= 40, "{done:?}");
        run.policy().check_invariants().unwrap();
    }
}
