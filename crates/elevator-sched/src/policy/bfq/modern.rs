//! BFQ's 5.x additions, as Linux 6.1's block/bfq-iosched.c has them; each
//! is behind a tunable that the `bfq-6.1` preset turns on.
//!
//! - **Learned injection** (5.2, "block, bfq: re-sample inject limit after
//!   a burst of requests" and the series around it): while the in-service
//!   queue idles, other queues' requests go to the device while fewer than
//!   its `inject_limit` are there. The limit is learned from the *total
//!   service time* of the queue's first requests (arrival to completion of
//!   a request that makes the empty in-service queue non-empty): measured
//!   with nothing in the device it is the baseline; measured after
//!   injection, below 3/2 of the baseline the limit rises by one (up to
//!   the device's observed depth), at or above it falls by one. The limit
//!   starts at 0 for a short-think queue and 1 for a long-think one, and is
//!   reset a second after it last fell (`bfq_update_inject_limit`,
//!   `bfq_reset_inject_limit`, `bfq_add_request`). On flash, a large
//!   request (64 sectors or more) is injected only into an empty device
//!   (`bfq_choose_bfqq_for_injection`).
//! - **Injection order** (`bfq_select_queue`): first the in-service task's
//!   own async I/O, then its waker's, then a queue it wakes, without
//!   limit; only then another queue within the limit.
//! - **Waker detection** (5.4, "block, bfq: detect wakers and
//!   unconditionally inject their I/O"; modelled in the 5.14 form of Jan
//!   Kara's "bfq: Improve waker detection"): queue W wakes Q if Q, with a
//!   long think time and nothing outstanding, gets its first request less
//!   than 4 ms after a completion of W, three times within
//!   `128 × slice_idle` of the first time (`bfq_check_waker`).
//! - **Stable merging** (5.13, "block, bfq: merge bursts of newly-created
//!   queues"): a sync queue created within `bfq_burst_interval` (180 ms)
//!   of the last one created in its group, with the same class and level,
//!   is merged with it at once on NCQ flash; elsewhere the merge is
//!   scheduled and done on a request arriving 600 ms
//!   (`bfq_late_stable_merging`) after creation, unless idling would then
//!   boost the queue's throughput (`bfq_do_or_sched_stable_merge`,
//!   `bfq_setup_stable_merge`). Stably merged queues are never split and
//!   may still be weight-raised.
//! - **Per-queue tag share** (`bfqq_request_over_limit`, Jan Kara's
//!   "bfq: Limit number of requests consumed by each cgroup", 2022): a
//!   queue holding its weight's share of the depth `bfq_limit_depth` gives
//!   its kind of request is trimmed to depth 1.
//!
//! Departures: the kernel counts a queue's requests from tag allocation
//! (queued here or in the device); the engine's slots stand for the tags,
//! so, as with `limit_depth`, the shares cap what the device holds. The
//! per-queue share is taken at the queue's own level only (the kernel also
//! checks each ancestor group's). "Nothing outstanding for the process"
//! (`bic->requests <= 1`) is read as the queue holding nothing.
//!
//! Invariants: every queue index kept here (waker, tentative waker, stable
//! merge target, last completed, last created) names a live queue: freeing
//! a queue clears them (`forget_queue`); `inject_limit` only changes
//! through the three steps above.

use super::*;

impl Bfq {
    /// `bfq_reset_inject_limit`.
    pub(super) fn reset_inject_limit(&mut self, q: QueueIdx, now: Instant) {
        self.waited_rq = None;
        let qu = self.qm(q);
        qu.last_serv_time = Duration::ZERO;
        qu.inject_limit = u32::from(!qu.short_ttime);
        qu.decrease_time = now;
    }

    /// A request arrives for sync queue `q` holding nothing: the waker
    /// check and the inject limit's sampling (`bfq_add_request`).
    pub(super) fn first_request(&mut self, q: QueueIdx, now: Instant) {
        if self.waker_detection {
            self.check_waker(q, now);
        }
        if !self.injection {
            return;
        }
        if now >= self.q(q).decrease_time + INJECT_LIMIT_RESET {
            self.reset_inject_limit(q, now);
        }
        let qu = self.q(q);
        let idle_device = self.rq_in_driver == 0;
        let injected_since =
            qu.last_serv_time > Duration::ZERO && self.rqs_injected && self.rq_in_driver > 0;
        if self.in_service == Some(q)
            && (idle_device || injected_since)
            && now >= qu.decrease_time + INJECT_SAMPLE_INTERVAL
        {
            self.last_empty_occupied = now;
            self.wait_dispatch = true;
            if idle_device {
                self.rqs_injected = false;
            }
        }
    }

    /// The waited-for first request of `q` completed
    /// (`bfq_update_inject_limit`); called before `rq_in_driver` drops.
    pub(super) fn update_inject_limit(&mut self, q: QueueIdx, now: Instant) {
        let total = now.since(self.last_empty_occupied);
        let (rqs_injected, in_driver, max_in_driver) =
            (self.rqs_injected, self.rq_in_driver, self.max_rq_in_driver);
        let qu = self.qm(q);
        let old = qu.inject_limit;
        if qu.last_serv_time > Duration::ZERO && rqs_injected {
            let (num, shift) = INJECT_INFLATION;
            let threshold = Duration((qu.last_serv_time.nanos() * num) >> shift);
            if total >= threshold && old > 0 {
                qu.inject_limit -= 1;
                qu.decrease_time = now;
            } else if total < threshold && old <= max_in_driver {
                qu.inject_limit += 1;
            }
        }
        if (qu.last_serv_time == Duration::ZERO && in_driver == 1) || total < qu.last_serv_time {
            if qu.last_serv_time == Duration::ZERO {
                // A baseline at last: start trying injection.
                qu.inject_limit = old.max(1);
            }
            qu.last_serv_time = total;
        } else if !rqs_injected && in_driver == 1 {
            qu.last_serv_time = total;
        }
        self.waited_rq = None;
        self.rqs_injected = false;
    }

    /// `bfq_check_waker`.
    fn check_waker(&mut self, q: QueueIdx, now: Instant) {
        let Some(w) = self.last_completed else { return };
        let recent = self
            .last_completion
            .is_some_and(|t| now.since(t) < WAKER_WINDOW);
        if w == q || self.q(q).short_ttime || !recent {
            return;
        }
        let span = self.slice_idle.mul(WAKER_SPAN_SLICES);
        let qu = self.qm(q);
        if qu.tentative_waker != Some(w) || now > qu.waker_detection_started + span {
            qu.tentative_waker = Some(w);
            qu.waker_detections = 1;
            qu.waker_detection_started = now;
        } else {
            qu.waker_detections += 1;
        }
        if qu.waker_detections == WAKER_DETECTIONS {
            qu.waker = Some(w);
            qu.tentative_waker = None;
        }
    }

    /// The queue `q` would wake by completing, if any (the head of the
    /// kernel's `woken_list`).
    fn woken_by(&self, s: QueueIdx) -> Option<QueueIdx> {
        self.queues
            .iter()
            .enumerate()
            .find(|(_, qu)| qu.as_ref().is_some_and(|qu| qu.waker == Some(s)))
            .map(|(i, _)| i as QueueIdx)
    }

    /// Busy `q` with a next request that fits its budget and the tags.
    fn may_inject_from(&self, q: QueueIdx) -> bool {
        let qu = self.q(q);
        let Some(id) = qu.next_rq else { return false };
        let r = qu.sorted.get(id).expect("queued");
        qu.busy
            && self.charge(q, r.sectors) as i64 <= qu.budget_left(&self.wf)
            && self.depth_allows(q, id, r.sync, r.is_read())
    }

    /// While the in-service queue `s` is kept (idling or waiting for its
    /// completions): the queue to take a request from meanwhile, in
    /// `bfq_select_queue`'s order.
    pub(super) fn choose_for_injection(&mut self, s: QueueIdx, now: Instant) -> Option<QueueIdx> {
        if !self.injection {
            return None;
        }
        let su = self.q(s);
        let owner = su.owner;
        let group = su.group;
        // The same task's async I/O cannot hurt it.
        let own_async = self.async_of.iter().find_map(|(&(g, _, _), &a)| {
            let au = self.q(a);
            let id = au.next_rq?;
            let task = au.sorted.get(id)?.task;
            (g == group && owner == Some(task)).then_some(a)
        });
        if let Some(a) = own_async.filter(|&a| self.may_inject_from(a)) {
            return Some(a);
        }
        if self.waker_detection {
            if let Some(w) = self.q(s).waker.filter(|&w| self.may_inject_from(w)) {
                return Some(w);
            }
            if let Some(b) = self.woken_by(s).filter(|&b| self.may_inject_from(b)) {
                return Some(b);
            }
        }
        let su = self.q(s);
        if self.idling_boosts_throughput(s)
            || !(su.wr_coeff == 1 || self.wr_busy > 1 || !su.short_ttime)
        {
            return None;
        }
        let q = self.choose_bfqq_for_injection(s, now)?;
        self.rqs_injected = true;
        Some(q)
    }

    /// `bfq_choose_bfqq_for_injection`.
    fn choose_bfqq_for_injection(&self, s: QueueIdx, now: Instant) -> Option<QueueIdx> {
        let su = self.q(s);
        let always = su.wr_coeff == 1 || !su.short_ttime;
        let mut limit = su.inject_limit;
        // No baseline yet and the device idles for long: inject one.
        if limit == 0
            && su.last_serv_time == Duration::ZERO
            && su.wait_request
            && now >= self.last_idling_start + self.slice_idle
        {
            limit = 1;
        }
        if self.rq_in_driver >= limit {
            return None;
        }
        self.queues.iter().enumerate().find_map(|(i, qu)| {
            let qu = qu.as_ref()?;
            let q = i as QueueIdx;
            if q == s || !(always || qu.wr_coeff > 1) || !self.may_inject_from(q) {
                return None;
            }
            let r = qu.sorted.get(qu.next_rq?)?;
            // One large request at a time on flash.
            let large = !self.rotational && r.sectors >= SECT_THR_NONROT && self.rq_in_driver >= 1;
            (!large).then_some(q)
        })
    }

    /// `bfqq_request_over_limit` at the queue's level: whether `q` holds
    /// its weight's share of `limit` in the device. The weights of higher
    /// classes count `IOPRIO_BE_NR` times per class step.
    pub(super) fn over_share(&self, q: QueueIdx, limit: u32) -> bool {
        let qu = self.q(q);
        let entity = &self.wf.es[qu.entity as usize];
        if entity.place == Place::Off {
            return false;
        }
        let trees = &self.wf.sds[qu.group as usize].trees;
        let wsum = trees[..=qu.class.index()]
            .iter()
            .fold(0u64, |acc, t| acc * IOPRIO_BE_NR + t.wsum);
        if wsum == 0 {
            return false;
        }
        // DIV_ROUND_CLOSEST.
        let share = (u64::from(limit) * entity.weight + wsum / 2) / wsum;
        u64::from(qu.dispatched) >= share.max(1)
    }

    /// A new sync queue `q` of `task`: merge it with the last queue created
    /// in its group, or schedule that (`bfq_do_or_sched_stable_merge`).
    pub(super) fn stable_merge_on_creation(
        &mut self,
        task: TaskId,
        q: QueueIdx,
        now: Instant,
    ) -> QueueIdx {
        let group = self.q(q).group;
        let Some(last) = self.groups[group as usize].last_created else {
            self.groups[group as usize].last_created = Some(q);
            return q;
        };
        let (lu, qu) = (self.q(last), self.q(q));
        let restart = lu.creation_time + STABLE_MERGE_ACTIVATION < qu.creation_time
            || lu.class != qu.class
            || lu.orig_weight != qu.orig_weight;
        if restart {
            self.groups[group as usize].last_created = Some(q);
            return q;
        }
        if qu.creation_time > lu.creation_time + BURST_INTERVAL {
            return q;
        }
        if self.nonrot_with_queueing {
            // Nothing to gain from keeping them apart: merge now.
            let Some(n) = self.setup_merge(q, last) else {
                return q;
            };
            self.qm(n).stably_merged = true;
            self.merge_queues(task, q, n, now);
            return n;
        }
        self.qm(q).stable_merge_with = Some(last);
        q
    }

    /// The delayed stable merge of `q`, if one is due
    /// (`bfq_setup_cooperator`'s first branch, `bfq_setup_stable_merge`).
    pub(super) fn late_stable_merge(&mut self, q: QueueIdx, now: Instant) -> Option<QueueIdx> {
        let qu = self.q(q);
        let target = qu.stable_merge_with?;
        let due = !qu.just_created
            && passed(qu.split_time, LATE_STABLE_MERGING, now)
            && now > qu.creation_time + LATE_STABLE_MERGING;
        if self.nonrot_with_queueing || !qu.sync || !due {
            return None;
        }
        self.qm(q).stable_merge_with = None;
        if self.idling_boosts_throughput(q) || self.q(target).tasks == 0 {
            return None;
        }
        let n = self.setup_merge(q, target)?;
        self.qm(n).stably_merged = true;
        self.qm(q).stably_merged = true;
        Some(n)
    }

    /// Drop every reference to `q`, which is being freed.
    pub(super) fn forget_queue(&mut self, q: QueueIdx) {
        for other in self.queues.iter_mut().flatten() {
            if other.waker == Some(q) {
                other.waker = None;
            }
            if other.tentative_waker == Some(q) {
                other.tentative_waker = None;
            }
            if other.stable_merge_with == Some(q) {
                other.stable_merge_with = None;
            }
        }
        if self.last_completed == Some(q) {
            self.last_completed = None;
        }
        for g in &mut self.groups {
            if g.last_created == Some(q) {
                g.last_created = None;
            }
        }
    }
}
